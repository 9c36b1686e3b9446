"""Type stubs of the extension module ``fraglab._native`` (crates/py/src/lib.rs)."""

from typing import List, Optional, Sequence, Tuple

__version__: str

class FraglabError(ValueError):
    """An error of fraglab's: bad input or a run that could not complete."""

class SpecError(FraglabError):
    """A spec that could not be read, parsed or validated."""

    file: Optional[str]
    line: Optional[int]
    key: Optional[str]
    message: str

class Cancel:
    """A cancellation flag for runs started on threads other than the main one."""

    def __init__(self) -> None: ...
    def set(self) -> None: ...
    def is_set(self) -> bool: ...

def run(
    spec: str, overrides: Sequence[Tuple[str, str]], seed: Optional[int] = None, cancel: Optional[Cancel] = None
) -> Tuple[str, str, str, List[str]]: ...
def config_label(config: str) -> Tuple[str, List[str]]: ...
def run_config(config: str, run: int, cancel: Optional[Cancel] = None) -> Tuple[str, str, int]: ...
def compare_results(results: Sequence[Tuple[str, str, str]], baseline: Optional[str] = None) -> str: ...
def compare_dirs(dirs: Sequence[str], baseline: Optional[str] = None) -> str: ...
def examples() -> List[str]: ...
