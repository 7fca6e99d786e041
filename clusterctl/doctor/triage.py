"""A triage for every failed log, known cause or not: the first error in time across the
nodes' and ranks' logs (not the last traceback, which is most often a consequence), the
component that failed, and the command that confirms a cause there."""

from __future__ import annotations

from dataclasses import dataclass

# RE2, as the signatures: a line of a hostile log can be a megabyte, and every pattern here
# must stay linear in it (Python's re backtracks: `NCCL WARN .*error` over a line of repeated
# "NCCL WARN " is quadratic)
import re2 as re

# Lines that say something failed, in the words of the tools that print them: a Python
# exception (behind Ray's "(Actor pid=N)" and vLLM's "ERROR date [file:N]" prefixes, or
# wrapped by Ray as RayTaskError(Inner)), NCCL's and CUDA's/HIP's error codes, the container
# runtime's and SLURM's error lines, glog's F-level lines, compilers and the dynamic linker,
# a signal. Warnings are not failures (a healthy NCCL run prints WARN lines).
EXCEPTION = re.compile(
    r"(?:^|[\s>|:\]])(?P<exception>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))"
    r"(?:\((?P<inner>[\w.]+)\))?: (?P<message>.+)$"
)
FAILURE = re.compile(
    r"NCCL (?:failure|error)|\bnccl(?:System|Internal|InvalidUsage|UnhandledCuda|Remote)Error"
    r"|\bCUDA error\b|\bHIP error\b|cuda runtime error|\bhipError\w+|\bCUDA_ERROR_\w+"
    r"|docker: Error response from daemon|OCI runtime \w+ failed|nvidia-container-cli: \w+ error"
    r"|(?:srun|salloc|sbatch|slurmstepd(?:-\S+)?): error:|\bFATA\[\d+\]"
    r"|^F\d{4} \d\d:\d\d:\d\d|\] \(raylet\) .*\bE \d+|\bSegmentation fault\b"
    r"|terminate called after throwing|\bfatal error:|collect2: error|\bld: cannot find"
    r"|cannot open shared object file|Failed to initialize NVML|undefined symbol:"
    r"|\bNCCL WARN (?:Cuda failure|.*\b(?:[Ee]rror|timed out|failed|not found|[Uu]nable)\b)"
    # a program refusing how it was called (`srun: unrecognized option '--container-image'`)
    r"|^[\w.-]+: (?:unrecognized|invalid|unknown) option\b"
    r"|\bXid\b|\bNVRM: |uncorrectable ECC|\bERROR\b|\bFAILED\b|Unable to open /dev/"
    r"|exitcode: -?\d+|\bKilled\b|out of memory|core dumped|\bAborted\b|\bpanic: "
    r"|^\[E[\s\d]|\[\d{4}-\d\d-\d\d [\d:,.]+ E \d+ \d+\]|(?:^|\s)(?:[Ee]rror|FATAL)[:\]] "
    r"|^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\s*$|\btimed out\b|Connection refused"
    r"|No such file or directory|exit(?:ed with)? (?:code|status):? ?[1-9]|Assertion .* failed"
)
NOT_A_FAILURE = re.compile(
    r"Retrying in|attempt \d+/\d+|\b0 errors?\b|\b(?:[Ee]rrors?|failed|failures?)\s*[:=]\s*0\b"
    r"|FutureWarning|DeprecationWarning|\[state-dump\]"
    # a line its own writer logged as information (Ray's glog "I"/"W", NCCL's INFO)
    r"|^\[[\d\- :,.]+ [IDW] \d+ \d+\]|\) \[[\d\- :,.]+ [IDW] \d+ \d+\]|\bINFO\b|\bDEBUG\b"
)

# Which component a failure line belongs to: its own words first, then the files of the
# traceback it ends (a vLLM frame's error is vLLM's even when it is a ValueError).
_WORDS: tuple[tuple[str, str], ...] = (
    (
        "container-runtime",
        r"nvidia-container-cli|OCI runtime|docker: Error|could not select "
        r"device driver|/dev/kfd|/dev/dri|containerd|runc create|nvidia-ctk",
    ),
    ("slurm", r"\bsrun\b|slurmstepd|\bsbatch\b|\bsalloc\b|SLURM_|NoDevFiles"),
    (
        "gpu-driver-hardware",
        r"\bXid\b|NVRM|\bECC\b|\bNVML\b|[Dd]river|CUDA_ERROR|cudaError"
        r"|hipError|HIP error|no kernel image|compute capability|code object|fabric ?manager"
        r"|invalid device function|GPU access blocked|nvidia\.ko|modpost|[Dd][Kk][Mm][Ss]"
        r"|kernel module",
    ),
    ("nccl", r"\bNCCL\b|\bRCCL\b|\bnccl\w*|ProcessGroupNCCL|pynccl"),
    (
        "python-env",
        r"ImportError|ModuleNotFoundError|undefined symbol|cannot open shared "
        r"object|GLIBC|No module named|cannot import name|Python\.h|fatal error:|collect2|ld: "
        r"cannot find|ResolutionImpossible|NumPy",
    ),
    (
        "torch-distributed",
        r"torch\.distributed|DistNetworkError|DistStoreError|TCPStore|[Gg]loo"
        r"|c10d|rendezvous|torchrun|elastic|MASTER_ADDR|MASTER_PORT|invalid device ordinal",
    ),
    (
        "inference-engine",
        r"\bvllm\b|\bvLLM\b|sglang|EngineCore|LLMEngine|KV cache|tensor "
        r"parallel|attention heads|sgl_kernel|router",
    ),
    (
        "training-backend",
        r"deepspeed|DeepSpeed|megatron|Megatron|FSDP|FullyShardedDataParallel"
        r"|ZeRO",
    ),
    (
        "ray",
        r"\braylet\b|\bGCS\b|gcs_|\bray\.exceptions|RaySystemError|ActorDiedError|"
        r"\bRay\b|ray::|placement group|runtime_env|working_dir",
    ),
    (
        "host",
        r"[Oo]ut of memory|\bOOM\b|oom|SIGKILL|exitcode: -9|\bKilled\b|Too many open "
        r"files|ulimit|memlock",
    ),
    ("gpu-driver-hardware", r"\bCUDA error\b|\bcuda\b"),
)
WORDS = tuple((component, re.compile(pattern)) for component, pattern in _WORDS)
FRAMES = (
    ("inference-engine", re.compile(r"/(?:vllm|sglang)/")),
    ("training-backend", re.compile(r"/(?:deepspeed|megatron|apex)/|fsdp")),
    ("torch-distributed", re.compile(r"torch/distributed/")),
    ("ray", re.compile(r"/ray/")),
)
FRAME = re.compile(r'\bFile "[^"]+", line \d+')
RAY_WRAPPER = re.compile(r"RayTaskError|RayActorError|ActorDiedError|RaySystemError")


@dataclass(frozen=True)
class FirstError:
    file: str
    line_no: int
    line: str
    component: str
    why: str  # what the component was read from


def is_failure(text: str) -> bool:
    return bool(EXCEPTION.search(text) or FAILURE.search(text)) and not NOT_A_FAILURE.search(text)


def component_of(text: str, frames: list[str]) -> tuple[str, str]:
    """The component a failure line names, else the one its traceback's frames run in."""
    for component, words in WORDS:
        if said := words.search(text):
            return component, f"the line says {said.group(0)!r}"
    for frame in reversed(frames):
        for component, path in FRAMES:
            if path.search(frame):
                return component, f"the traceback runs in {path.pattern.strip('/()?:')}"
    if EXCEPTION.search(text):
        return "python-env", "a Python exception outside the frameworks' own code"
    return "", "nothing in the line names a component"


class FirstErrorFinder:
    """Fed every line once (file, number, text, the line's time or the last one above it);
    keeps the earliest failure: by time where the logs are stamped, else in the order the
    files were given. A Ray wrapper (RayTaskError(X)) is read through to the error it wraps,
    further down the same file, for the component."""

    def __init__(self) -> None:
        self.frames: dict[str, list[str]] = {}
        self.best: tuple[float, int, FirstError] | None = None
        self.wrapper: dict[str, tuple[float, int, FirstError]] = {}  # file: waiting wrapper
        # a traceback whose exception line has not come (yet): where a log was cut off, or a
        # rank was stopped mid-call, its frames still say where it failed
        self.open_traceback: dict[str, tuple[float | None, int, int, str]] = {}
        self.order = 0

    def feed(self, file: str, number: int, text: str, stamp: float | None) -> None:
        self.order += 1
        stripped = text.strip()
        if FRAME.search(text):
            self.frames.setdefault(file, []).append(stripped)
            return
        if "Traceback (most recent call last)" in text:
            self.frames[file] = []
            self.open_traceback[file] = (stamp, self.order, number, stripped)
        if not is_failure(text):
            return
        key = stamp if stamp is not None else float("inf")
        self.open_traceback.pop(file, None)  # its exception line: the failure itself
        if file in self.wrapper and not RAY_WRAPPER.search(text):
            at, order, wrapper = self.wrapper.pop(file)
            component, why = component_of(text, self.frames.get(file, []))
            self._keep(at, order, FirstError(file, wrapper.line_no, wrapper.line, component, why))
            return
        component, why = component_of(text, self.frames.get(file, []))
        error = FirstError(file, number, stripped, component, why)
        if RAY_WRAPPER.search(text) and "(" in text:
            self.wrapper.setdefault(file, (key, self.order, error))
            return
        self._keep(key, self.order, error)

    def _keep(self, key: float, order: int, error: FirstError) -> None:
        if self.best is None or (key, order) < self.best[:2]:
            self.best = (key, order, error)

    def result(self) -> FirstError | None:
        for waiting in self.wrapper.values():  # a wrapper whose wrapped error never came
            self._keep(*waiting)
        self.wrapper.clear()
        for file, (stamp, order, number, line) in self.open_traceback.items():
            frames = self.frames.get(file, [])
            component, why = component_of("", frames)
            if frames and component:
                why = f"{why}; its exception line is not in the log"
                error = FirstError(file, number, line, component, why)
                self._keep(stamp if stamp is not None else float("inf"), order, error)
        self.open_traceback.clear()
        return self.best[2] if self.best else None
