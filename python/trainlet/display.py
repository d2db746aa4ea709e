"""What wait_for_job_status and get_job_logs(follow=True) show while they wait.

A tqdm bar (Debian's python3-tqdm; ``tqdm.auto``, so a widget in Jupyter when ipywidgets is
there, text otherwise) of the job's progressPercentage once a rank reports one, with the ETA
and metrics it reported; until then, the elapsed time and the job's phase.

Shown in Jupyter and on a terminal (stderr is a tty); ``TRAINLET_PROGRESS=0`` hides it and
``TRAINLET_PROGRESS=1`` shows it anywhere. Without tqdm nothing is shown.
"""

import os
import sys


def wanted():
    setting = os.environ.get("TRAINLET_PROGRESS", "")
    if setting in ("0", "false", "no"):
        return False
    if setting in ("1", "true", "yes"):
        return True
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _tqdm():
    try:
        from tqdm.auto import tqdm  # notebook widget when it can, text otherwise
    except ImportError:
        try:
            from tqdm import tqdm
        except ImportError:
            return None
    return tqdm


class JobProgressDisplay:
    """One job's bar. ``update(train_job)`` after each poll; ``close()`` at the end.

    ``file`` is where text bars go (stderr by default); tests pass a StringIO and
    ``enabled=True``.
    """

    def __init__(self, name, enabled=None, file=None):
        self.name = name
        self.enabled = wanted() if enabled is None else enabled
        self._file = file
        self._bar = None
        self._percent_mode = False
        self._tqdm = _tqdm() if self.enabled else None

    def _open(self, percent):
        if self._bar is not None:
            self._bar.close()
        kwargs = {"file": self._file} if self._file is not None else {}
        if percent:
            self._bar = self._tqdm(
                total=100,
                desc=self.name,
                unit="%",
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}{postfix}]",
                **kwargs,
            )
        else:
            self._bar = self._tqdm(
                total=None, desc=self.name, bar_format="{desc}: {elapsed}{postfix}", **kwargs
            )
        self._percent_mode = percent

    def update(self, job):
        if self._tqdm is None:
            return
        status = job.trainer_status
        percent = status is not None and status.progress_percentage is not None
        if self._bar is None or percent != self._percent_mode:
            self._open(percent)
        postfix = job.phase
        if percent:
            self._bar.n = max(0, min(100, status.progress_percentage))
            if status.estimated_remaining_seconds is not None:
                postfix += f", ETA {_duration(status.estimated_remaining_seconds)}"
            for m in status.metrics[:4]:
                postfix += f", {m.name}={m.value}"
        self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.refresh()

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _duration(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
