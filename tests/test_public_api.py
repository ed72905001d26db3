"""The lazy package ``__init__`` files of the cores keep their public API.

``privfed.secagg``, ``privfed.secagg.protocol``, ``privfed.secagg.primitives`` and
``privfed.dp`` load their names on first use (PEP 562, :func:`privfed._lazy.lazy_exports`).
Each keeps three views of the same names -- the runtime table ``_EXPORTS``
(name -> defining module), the literal ``__all__`` (what ``import *``, mypy and the
docs read) and the ``if TYPE_CHECKING:`` imports (what type checkers and IDEs
resolve).  These tests fail, naming the name, when any two disagree, when a
submodule adds a name to its ``__all__`` that its package neither re-exports nor
declares internal here, and when a lazily exported name does not resolve to the
object its defining module holds.  :data:`EXPECTED_ALL` is the public API as it
stood when the packages became lazy; changing a package's ``__all__`` means
editing it here too, on purpose.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

PACKAGES = ("privfed.secagg", "privfed.secagg.protocol", "privfed.secagg.primitives", "privfed.dp")

#: Each package's ``__all__``, exactly (order included).
EXPECTED_ALL: dict[str, list[str]] = {
    "privfed.secagg": [
        "AdvertiseKeys",
        "ClientId",
        "ClientIds",
        "ClientRecord",
        "CommitteeRequest",
        "CommitteeReveal",
        "ConsistencyRequest",
        "ConsistencySignature",
        "EncryptedShares",
        "EncryptedSharesBundle",
        "FileRevealJournal",
        "GraphMode",
        "IdRuns",
        "IdentityEnrolment",
        "IdentityKey",
        "IdentityRegistry",
        "IdentityRoot",
        "MaskedInput",
        "MemoryRevealJournal",
        "Message",
        "MessageType",
        "RevealJournal",
        "RevealedNoiseShare",
        "RevealedShare",
        "Roster",
        "RosterEntry",
        "RoutedShares",
        "RunReport",
        "SecAggClient",
        "SecAggConfig",
        "SecAggPlusBounds",
        "SecAggPlusParameters",
        "SecAggServer",
        "SecurityMode",
        "Stage",
        "SurvivorSignature",
        "ThresholdPolicy",
        "UnmaskRequest",
        "UnmaskResponse",
        "decode_message",
        "export_client_state",
        "find_secagg_plus_parameters",
        "harary_neighbourhoods",
        "majority_threshold",
        "new_session_id",
        "noise_layers_to_reveal",
        "restore_client_state",
        "run_in_memory",
        "run_protocol",
        "secagg_plus_bounds",
        "self_mask_commitment",
    ],
    "privfed.secagg.protocol": [
        "AdvertiseKeys",
        "CommitteeRequest",
        "CommitteeReveal",
        "ConsistencyRequest",
        "ConsistencySignature",
        "EncryptedShares",
        "EncryptedSharesBundle",
        "FileRevealJournal",
        "GraphMode",
        "IdRuns",
        "IdentityEnrolment",
        "IdentityKey",
        "IdentityRegistry",
        "IdentityRoot",
        "MaskedInput",
        "MemoryRevealJournal",
        "Message",
        "MessageType",
        "RevealJournal",
        "RevealedNoiseShare",
        "RevealedShare",
        "Roster",
        "RosterEntry",
        "RoutedShares",
        "SecAggClient",
        "SecAggConfig",
        "SecAggServer",
        "SecurityMode",
        "Stage",
        "SurvivorSignature",
        "UnmaskRequest",
        "UnmaskResponse",
        "decode_message",
        "export_client_state",
        "harary_neighbourhoods",
        "new_session_id",
        "noise_layers_to_reveal",
        "restore_client_state",
        "self_mask_commitment",
    ],
    "privfed.secagg.primitives": [
        "KEY_SIZE",
        "NONCE_SIZE",
        "OVERHEAD",
        "PRIME",
        "PRIVATE_KEY_SIZE",
        "PUBLIC_KEY_SIZE",
        "SECRET_SIZE",
        "SEED_SIZE",
        "SHARE_SIZE",
        "TAG_SIZE",
        "FixedPointConfig",
        "KeyPair",
        "Purpose",
        "Share",
        "agree",
        "check_no_wraparound",
        "combine",
        "derive_key",
        "derive_self_mask_seed",
        "expand",
        "expand_mod",
        "pairwise_key",
        "ring_add",
        "ring_sub",
        "ring_sum",
        "seal",
        "share_associated_data",
        "split",
        "unseal",
    ],
    "privfed.dp": [
        "DEFAULT_SCHEME",
        "DISCRETE_GAUSSIAN_SAMPLER",
        "EXACT_DISCRETE_GAUSSIAN_SAMPLER",
        "GAUSSIAN_SAMPLER",
        "ROUNDED_GAUSSIAN_SAMPLER",
        "SKELLAM_SAMPLER",
        "Accountant",
        "AccountantRelation",
        "Accounting",
        "Adjacency",
        "Bisection",
        "Bracket",
        "DPSGDCalibration",
        "DistributedBlockRelease",
        "DistributedDiscreteGaussianRelease",
        "DistributedSkellamRdpRelease",
        "DistributedSkellamRelease",
        "GaussianRelease",
        "LedgerGuarantee",
        "Nudge",
        "Partition",
        "PartitionKey",
        "PrivacyLedger",
        "Release",
        "ReleaseEvent",
        "SubsampledGaussianRelease",
        "block_rdp",
        "block_zcdp",
        "calibrate",
        "calibrate_analytic_gaussian",
        "calibrate_block_noise",
        "calibrate_distributed_discrete_gaussian",
        "calibrate_distributed_skellam",
        "calibrate_dpsgd",
        "calibrate_noise_multiplier",
        "check_ring",
        "compose_gdp",
        "count_sensitivity",
        "ddg_rdp",
        "ddg_zcdp",
        "discrete_gaussian",
        "dropout_inflation",
        "exact_discrete_gaussian",
        "exact_poisson",
        "gaussian_delta",
        "gaussian_epsilon",
        "gaussian_noise",
        "gdp_delta",
        "gdp_epsilon",
        "gdp_mu",
        "in_scheme",
        "joint_mu_squared",
        "log_wrap_probability",
        "min_honest_contributors",
        "mu_for_epsilon_delta",
        "partition_key",
        "rdp_delta",
        "rdp_epsilon",
        "register_release",
        "release_from_dict",
        "release_kinds",
        "rounded_gaussian",
        "second_moment_sensitivity",
        "skellam_noise",
        "skellam_rdp",
        "skellam_zcdp",
        "sum_sensitivity",
        "wrap_probability",
    ],
}

#: Subpackages whose modules a package does not re-export at all.
NOT_REEXPORTED_PACKAGES: dict[str, tuple[str, ...]] = {
    # The hazardous-materials layer is reached as privfed.secagg.primitives only.
    "privfed.secagg": ("privfed.secagg.primitives",),
}

#: Names in a public module's ``__all__`` that no package above it re-exports
#: (constants of the wire/state formats, internal checks, helpers of one layer).
INTERNAL: dict[str, frozenset[str]] = {
    # Distributed-DP training (imported from their modules; privfed.flower.DistributedDP
    # is the integrator's entry point).
    "privfed.dp.rotation": frozenset(
        ("MAX_ROTATION_DIMENSION", "hadamard_dimension", "random_signs", "rotate", "unrotate",
         "walsh_hadamard")
    ),
    "privfed.dp.rounding": frozenset(("DEFAULT_BETA", "conditional_round", "rounded_norm_bound")),
    "privfed.dp.training": frozenset(
        ("MAX_ROUNDING_INFLATION", "MECHANISMS", "TrainingNoisePlan", "central_noise_std",
         "count_release", "plan_training_noise", "record_training_round", "training_release")
    ),
    "privfed.dp.adaptive_clipping": frozenset(
        ("AdaptiveClipping", "MAX_CLIP_SCALE", "next_clip_scale", "update_noise_multiplier")
    ),
    "privfed.dp.training_codec": frozenset(
        ("EncodedUpdate", "NoisyAverage", "clip_update", "decode_noisy_sum", "encode_update",
         "noise_ratio")
    ),
    "privfed.secagg.parameters": frozenset(("MAX_NUM_CLIENTS", "THREAT_MODELS", "ThreatModel")),
    "privfed.secagg.threshold": frozenset(
        (
            "MIN_THRESHOLD",
            "ThresholdRule",
            "active_rule_holds",
            "check_active_threshold",
            "check_corrupted",
            "check_protocol_threshold",
            "requested_threshold",
        )
    ),
    "privfed.secagg.protocol.client": frozenset(("check_ring_vector",)),
    "privfed.secagg.protocol.commitment": frozenset(
        ("SEED_SIZE", "checked_layers", "noise_seed_commitment")
    ),
    "privfed.secagg.protocol.committee": frozenset(
        (
            "GRAPH_VALUE_SIZE",
            "GRINDING_BITS",
            "SECURITY_BITS",
            "committed_digest",
            "committee_positions",
            "committee_seats",
            "committee_seed",
            "default_committee_size",
            "graph_commitment",
            "new_graph_value",
            "reveal_payload",
            "seeds_per_root",
        )
    ),
    "privfed.secagg.protocol.config": frozenset(
        (
            "CONFIG_DIGEST_VERSION",
            "MAX_CLIENT_ID",
            "MAX_COMPLETE_GRAPH_CLIENTS",
            "MAX_VECTOR_LENGTH",
            "SESSION_ID_LENGTHS",
        )
    ),
    "privfed.secagg.protocol.graph": frozenset(
        (
            "advertisement_hash",
            "build_neighbourhoods",
            "graph_seed",
            "graph_seed_of_root",
            "graph_session",
            "harary_neighbours",
        )
    ),
    "privfed.secagg.protocol.roster_tree": frozenset(
        (
            "ProofError",
            "RosterTree",
            "check_coverage",
            "leaf_hash",
            "root_of_proof",
            "window_indices",
        )
    ),
    "privfed.secagg.protocol.messages.roster": frozenset(("IdentityProof", "RosterProof")),
    "privfed.secagg.protocol.identity_root": frozenset(
        (
            "ENROLMENT_FORMAT",
            "ROOT_FORMAT",
            "identity_document",
            "identity_tree",
            "key_digest",
            "proven_keys",
            "registry_digest",
        )
    ),
    "privfed.secagg.protocol.identity": frozenset(
        (
            "IDENTITY_PUBLIC_KEY_SIZE",
            "REGISTRY_FORMAT",
            "REGISTRY_VERSION",
            "SIGNATURE_SIZE",
            "advertisement_payload",
            "survivor_set_payload",
            "verify_signature",
        )
    ),
    "privfed.secagg.protocol.messages": frozenset(
        (
            "COMMITMENT_SIZE",
            "MAX_CIPHERTEXT_SIZE",
            "MAX_SHARE_SIZE",
            "PUBLIC_KEY_SIZE",
            "SIGNATURE_SIZE",
            "WIRE_MAGIC",
            "WIRE_VERSION",
        )
    ),
    "privfed.secagg.protocol.state": frozenset(
        (
            "JournalEntry",
            "RevealKind",
            "CONFIG_VERSION",
            "STATE_MAGIC",
            "STATE_VERSION",
            "client_step",
            "decode_config",
            "encode_config",
            "record_answer",
        )
    ),
    "privfed.secagg.primitives.aead": frozenset(("AD_VERSION", "MAX_PLAINTEXT_SIZE")),
    "privfed.secagg.primitives.fixedpoint": frozenset(("MAX_FRACTIONAL_BITS",)),
    "privfed.secagg.primitives.keys": frozenset(
        (
            "HKDF_SALT",
            "KDF_VERSION",
            "MAX_CLIENT_ID",
            "MAX_DERIVED_KEY_SIZE",
            "MAX_SESSION_ID_SIZE",
            "MIN_DERIVED_KEY_SIZE",
            "SHARED_SECRET_SIZE",
            "is_low_order",
        )
    ),
    "privfed.secagg.primitives.prg": frozenset(("MAX_LENGTH", "add_expanded", "add_expanded_many")),
    "privfed.secagg.primitives.shamir": frozenset(
        ("FIELD_BYTES", "combine_batches", "combine_many", "split_many")
    ),
    "privfed.dp.calibrator": frozenset(("bracket_and_bisect", "raise_until")),
    "privfed.dp.distributed": frozenset(
        (
            "DDG_MIN_NOISE_STD",
            "MAX_CONTRIBUTORS",
            "WRAP_PROBABILITY_LIMIT",
            "DistributedMechanism",
            "calibrate_noise_parameter",
            "ddg_tau",
            "effective_sensitivities",
        )
    ),
    "privfed.dp.distributed_blocks": frozenset(
        (
            "LAYER_SEED_BYTES",
            "BlockNoise",
            "RingBlocks",
            "check_layered_mechanism",
            "check_ring_blocks",
            "excess_layer_noise",
            "layer_poisson_means",
            "layer_variances",
            "layered_noise",
            "noise_variance",
            "ring_log_wrap_bound",
            "ring_wrap_bound",
            "sample_block_noise",
        )
    ),
    "privfed.dp.dpsgd_calibration": frozenset(
        ("MAX_NOISE_MULTIPLIER", "MIN_NOISE_MULTIPLIER", "MIN_SAMPLING_RATE", "RELATIVE_TOLERANCE")
    ),
    "privfed.dp.events": frozenset(
        (
            "check_accountant",
            "check_adjacency",
            "check_bool",
            "check_name",
            "check_partition",
            "check_relation",
            "check_sampler",
        )
    ),
    "privfed.dp.noise": frozenset(("MAX_INTEGER_SCALE", "Seed")),
    "privfed.dp.rdp": frozenset(("RDP_ORDERS", "check_orders", "meets_rdp_target")),
    "privfed.dp.registry": frozenset(("RELEASE_KINDS", "is_registered")),
    "privfed.dp.samplers": frozenset(
        (
            "MAX_EXACT_DISCRETE_GAUSSIAN_SCALE",
            "MAX_POISSON_MEAN",
            "MIN_EXACT_DISCRETE_GAUSSIAN_SCALE",
            "MIN_POISSON_MEAN",
        )
    ),
}

#: The privfed modules ``import <package>`` may load: the package inits on its path.
LIGHT = ("privfed", "privfed._version", "privfed.errors", "privfed._lazy")


def _package(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _public_modules(package: str) -> Iterator[str]:
    """Every public module under ``package`` (recursively) that it may re-export from."""
    excluded = NOT_REEXPORTED_PACKAGES.get(package, ())
    for info in pkgutil.walk_packages(_package(package).__path__, package + "."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts):
            continue
        if any(info.name == e or info.name.startswith(e + ".") for e in excluded):
            continue
        yield info.name


def type_checking_imports(
    source: str, read: Callable[[str], str] | None = None
) -> dict[str, str]:
    """``{name: module}`` of the ``from module import name`` under ``if TYPE_CHECKING:``.

    A ``from package import *`` there stands for the public names of that
    package's own TYPE_CHECKING imports (what mypy sees through it), read with
    ``read(package) -> source`` (by default the installed package's file).
    """
    read = read or _package_source
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    if [alias.name for alias in stmt.names] == ["*"]:
                        starred = type_checking_imports(read(stmt.module), read)
                        found.update(
                            (name, module)
                            for name, module in starred.items()
                            if not name.startswith("_")
                        )
                        continue
                    for alias in stmt.names:
                        found[alias.asname or alias.name] = stmt.module
    return found


def _package_source(name: str) -> str:
    module = _package(name)
    assert module.__file__ is not None
    return Path(module.__file__).read_text(encoding="utf-8")


def table_mismatches(
    table: Mapping[str, str], all_: list[str], static: Mapping[str, str]
) -> list[str]:
    """Disagreements between a lazy table, ``__all__`` and the TYPE_CHECKING imports."""
    problems = [
        f"{n!r} is in __all__ but not in _EXPORTS" for n in dict.fromkeys(all_) if n not in table
    ]
    problems += [f"{n!r} is in _EXPORTS but not in __all__" for n in table if n not in all_]
    problems += [
        f"{n!r} appears twice in __all__" for n in dict.fromkeys(all_) if all_.count(n) > 1
    ]
    for name, module in table.items():
        if name not in static:
            problems.append(f"{name!r} has no import under TYPE_CHECKING (mypy cannot see it)")
        elif static[name] != module:
            problems.append(
                f"{name!r}: _EXPORTS says {module}, the TYPE_CHECKING import {static[name]}"
            )
    problems += [f"{n!r} is imported under TYPE_CHECKING only" for n in static if n not in table]
    return problems


def unexported(
    package_all: list[str], module_alls: Mapping[str, list[str]], internal: Mapping[str, Any]
) -> list[str]:
    """Names of the modules' ``__all__`` that the package neither re-exports nor declares."""
    return [
        f"{module}.{name} is in {module}.__all__ but neither re-exported nor listed in INTERNAL"
        for module, names in module_alls.items()
        for name in names
        if name not in package_all and name not in internal.get(module, ())
    ]


# -- the checks ---------------------------------------------------------------------


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_unchanged(package: str) -> None:
    assert _package(package).__all__ == EXPECTED_ALL[package]


@pytest.mark.parametrize("package", PACKAGES)
def test_lazy_table_all_and_type_checking_imports_agree(package: str) -> None:
    module = _package(package)
    assert module.__file__ is not None
    static = type_checking_imports(Path(module.__file__).read_text(encoding="utf-8"))
    problems = table_mismatches(module._EXPORTS, list(module.__all__), static)
    assert problems == [], f"{package}: " + "; ".join(problems)


def test_latent_wing_table_and_type_checking_imports_agree() -> None:
    # The engines' one lazy init keeps the same three views as the cores'.
    module = _package("privfed.engines.latent")
    assert module.__file__ is not None
    static = type_checking_imports(Path(module.__file__).read_text(encoding="utf-8"))
    assert table_mismatches(module._EXPORTS, list(module.__all__), static) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_submodule_exports_are_reexported_or_declared_internal(package: str) -> None:
    alls = {m: list(getattr(_package(m), "__all__", ())) for m in _public_modules(package)}
    assert alls, f"no public modules found under {package}"
    problems = unexported(list(_package(package).__all__), alls, INTERNAL)
    assert problems == [], (
        f"{package}: add each name to the package's _EXPORTS/__all__/TYPE_CHECKING "
        "imports, or to INTERNAL in this file: " + "; ".join(problems)
    )


def test_internal_list_is_not_stale() -> None:
    problems = []
    for module, names in INTERNAL.items():
        public = set(getattr(_package(module), "__all__", ()))
        problems += [f"{module}.{n} is no longer in its __all__" for n in names - public]
        above = [p for p in PACKAGES if module.startswith(p + ".")]
        exported = {n for p in above for n in _package(p).__all__}
        problems += [f"{module}.{n} is re-exported after all" for n in names & exported]
    assert problems == []


def test_checkers_report_each_kind_of_mismatch() -> None:
    # The helpers above can fail: each kind of disagreement is reported by name.
    problems = table_mismatches(
        {"a": "m.one", "b": "m.two", "c": "m.three"},
        ["a", "b", "d", "d"],
        {"a": "m.one", "b": "m.other", "e": "m.four"},
    )
    for expected in (
        "'d' is in __all__ but not in _EXPORTS",
        "'c' is in _EXPORTS but not in __all__",
        "'d' appears twice in __all__",
        "'c' has no import under TYPE_CHECKING",
        "'b': _EXPORTS says m.two, the TYPE_CHECKING import m.other",
        "'e' is imported under TYPE_CHECKING only",
    ):
        assert any(p.startswith(expected) for p in problems), expected
    assert len(problems) == 6
    assert unexported(["x"], {"m": ["x", "y", "z"]}, {"m": frozenset({"z"})}) == [
        "m.y is in m.__all__ but neither re-exported nor listed in INTERNAL"
    ]
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from m.one import a, b as c\n"
    )
    assert type_checking_imports(source) == {"a": "m.one", "c": "m.one"}
    # A star import stands for the starred package's own public TYPE_CHECKING names.
    sources = {
        "m.sub": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from m.sub.x import p as p, _q as _q\n"
    }
    starred = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from m.sub import *\n"
    assert type_checking_imports(starred, sources.__getitem__) == {"p": "m.sub.x"}


# -- in a fresh interpreter, where nothing is loaded yet ----------------------------

_FRESH = """
import importlib, json, sys

package = {package!r}
before = set(sys.modules)
module = importlib.import_module(package)
loaded = sorted(m for m in set(sys.modules) - before if m.startswith("privfed"))
problems = []
for name in module.__all__:
    home = module._EXPORTS[name]
    try:
        value = getattr(module, name)
    except Exception as exc:
        problems.append(f"{{name}}: {{type(exc).__name__}}: {{exc}}")
        continue
    if value is not getattr(importlib.import_module(home), name):
        problems.append(f"{{name}} is not {{home}}.{{name}}")
    owner = getattr(value, "__module__", None)
    if (
        getattr(value, "__name__", None) == name
        and isinstance(owner, str)
        and owner.startswith("privfed")
        and owner != home
    ):
        problems.append(f"{{name}} is defined in {{owner}}, but _EXPORTS says {{home}}")
star = {{}}
exec(f"from {{package}} import *", star)
missing = sorted(set(module.__all__) - set(star))
print(json.dumps({{"loaded": loaded, "problems": problems, "star_missing": missing}}))
"""


def _fresh(code: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("package", PACKAGES)
def test_import_is_lazy_and_every_name_resolves(package: str) -> None:
    result = _fresh(_FRESH.format(package=package))
    parents = [package.rsplit(".", i)[0] for i in range(package.count("."), -1, -1)]
    # privfed.secagg (a parent of each secagg package) reads its table from the
    # protocol layer's package init.
    allowed = {*LIGHT, *parents}
    if "privfed.secagg" in parents:
        allowed.add("privfed.secagg.protocol")
    assert set(result["loaded"]) <= allowed, f"import {package} ran {result['loaded']}"
    assert result["problems"] == []
    assert result["star_missing"] == []


_ATTRIBUTES = """
import json
import privfed.secagg, privfed.dp
out = {
    "runner": type(privfed.secagg.runner).__name__,
    "calibration": privfed.dp.calibration.__name__,
    "nested": privfed.secagg.protocol.config.SecAggConfig.__name__,
    "in_dir": "SecAggConfig" in dir(privfed.secagg) and "__doc__" in dir(privfed.secagg),
    "hasattr_unknown": hasattr(privfed.dp, "no_such_name"),
}
try:
    privfed.secagg.no_such_name
except AttributeError as exc:
    out["error"] = str(exc)
print(json.dumps(out))
"""


def test_submodules_stay_reachable_as_attributes() -> None:
    # An eager __init__ imported its submodules, so ``privfed.dp.calibration`` worked
    # after ``import privfed.dp``; the lazy one imports them on that access.
    result = _fresh(_ATTRIBUTES)
    assert result == {
        "runner": "module",
        "calibration": "privfed.dp.calibration",
        "nested": "SecAggConfig",
        "in_dir": True,
        "hasattr_unknown": False,
        "error": "module 'privfed.secagg' has no attribute 'no_such_name'",
    }
