"""Run verl's own start-up validation on the job's Hydra overrides, without starting training.

Runs in a subprocess, in a Python where the pinned verl is installed with its dependencies
(clusterctl does not need them itself): the config is composed from verl's own config
directory with Hydra, exactly as ``@hydra.main(config_name="ppo_trainer")`` in
``verl/trainer/main_ppo.py`` composes it, then ``verl.utils.config.validate_config`` runs with
``need_reference_policy`` and ``need_critic`` as ``main()`` calls it (verl 0.9.1). That
instantiates the actor, critic and model config dataclasses, whose checks run too. verl 0.5
has no validate_config: its checks run in RayPPOTrainer.__init__, run here as main_ppo builds
the trainer.

The network is never reached: Hugging Face libraries run offline, so a model path that is
not on this machine (or in its HF cache) makes the model-dependent checks report that they
could not run.

    python3 verl_startup.py ENTRYPOINT CONFIG_NAME -- OVERRIDE...

Prints one JSON object: {"status": "ok" | "rejected" | "cannot-run", "message": "...",
"memory": the facts of verl_memory.py for clusterctl's GPU memory plan}.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from typing import Any

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"


def compose_config(config_name: str, overrides: list[str]) -> object:
    """The config main_ppo would run: verl's own config directory, composed by Hydra."""
    from pathlib import Path

    import verl
    from hydra import compose, initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def judge(config_name: str, overrides: list[str]) -> dict[str, str]:
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = compose_config(config_name, overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        return {"status": "rejected", "message": f"Hydra: {exc}".splitlines()[0]}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            validate(config)
    except HydraException as exc:  # a config dataclass refused the values it was built from
        cause = exc.__cause__ or exc
        if isinstance(cause, OSError):
            return _offline(cause)
        return {"status": "rejected", "message": _one_line(cause)}
    except (AssertionError, ValueError, TypeError, KeyError, OmegaConfBaseException) as exc:
        return {"status": "rejected", "message": _one_line(exc)}
    except OSError as exc:
        return _offline(exc)
    return {"status": "ok", "message": ""}


def verl_roles(config: Any) -> tuple[bool, bool]:
    """(reference policy, critic) as main_ppo decides them: verl's own need_reference_policy
    and need_critic; verl 0.5 has neither, and the same two settings decide there (TaskRunner.run
    maps the reference for either KL setting, RayPPOTrainer.__init__ the critic for GAE)."""
    try:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
    except ImportError:
        c = config
        ref = c.algorithm.use_kl_in_reward or c.actor_rollout_ref.actor.use_kl_loss
        return bool(ref), c.algorithm.adv_estimator == "gae"
    return bool(need_reference_policy(config)), bool(need_critic(config))


def validate(config: object) -> None:
    """verl's own start-up validation of the composed config, as its release runs it."""
    try:
        from verl.utils.config import validate_config
    except ImportError:  # verl <= 0.5: the checks run in RayPPOTrainer.__init__
        _validate_in_trainer(config)
        return
    reference, critic = verl_roles(config)
    validate_config(config=config, use_reference_policy=reference, use_critic=critic)


def _validate_in_trainer(config: object) -> None:
    """verl 0.5: RayPPOTrainer.__init__ (verl/trainer/ppo/ray_trainer.py) decides the critic,
    asserts the hybrid engine and calls _validate_config; it is built with the roles
    TaskRunner.run (verl/trainer/main_ppo.py) maps, all but loading the data set."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, Role

    class Judge(RayPPOTrainer):  # type: ignore[misc]
        def _create_dataloader(self, *args: object, **kwargs: object) -> None:
            pass  # reads the data files: no check of the config

    c = config  # an OmegaConf DictConfig
    roles = {Role.ActorRollout: object, Role.Critic: object}
    if c.reward_model.enable:  # type: ignore[attr-defined]
        roles[Role.RewardModel] = object
    if verl_roles(c)[0]:
        roles[Role.RefPolicy] = object
    Judge(config=c, tokenizer=None, role_worker_mapping=roles, resource_pool_manager=None)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"


def _offline(exc: OSError) -> dict[str, str]:
    """The model's config.json is not on this machine, and the network is never used."""
    return {
        "status": "cannot-run",
        "message": "the model-dependent checks need the model's config.json on this machine "
        f"(a local path or the HF cache); offline: {_one_line(exc)}",
    }


def memory_facts(config_name: str, overrides: list[str]) -> dict[str, object]:
    """The memory plan's facts from the same process (verl is imported once for both)."""
    try:
        from verl_memory import facts  # type: ignore[import-not-found]  # payload/, beside it

        return dict(facts({"config": config_name, "overrides": overrides, "hf_home": None}))
    except Exception as exc:  # the plan says it could not run; the verdict stands
        return {"status": "cannot-run", "message": _one_line(exc)}


if __name__ == "__main__":
    _entry, name, separator, *rest = sys.argv[1:]
    assert separator == "--"
    verdict: dict[str, object] = {**judge(name, rest)}
    verdict["memory"] = memory_facts(name, rest)
    try:  # the release that judged, said with its verdict (the job's own image: issue 46)
        from importlib.metadata import version

        verdict["release"] = version("verl")
    except Exception:  # verl from a source tree without metadata: not named
        pass
    print(json.dumps(verdict))
