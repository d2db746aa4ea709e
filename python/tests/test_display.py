"""The progress display of wait_for_job_status and get_job_logs(follow=True)."""

import io
import os
import unittest
from unittest import mock

from trainlet import Metric, Runtime, TrainerStatus, TrainJob
from trainlet import display


def job(phase, percent=None):
    status = None
    if percent is not None:
        status = TrainerStatus(progress_percentage=percent, estimated_remaining_seconds=75,
                               metrics=[Metric("loss", "0.3")])
    return TrainJob(name="j", runtime=Runtime("torch-distributed"), steps=[], num_nodes=1,
                    creation_timestamp=None, status="Running", phase=phase, trainer_status=status)


class DisplayTest(unittest.TestCase):
    def test_elapsed_then_percentage_once_reported(self):
        out = io.StringIO()
        d = display.JobProgressDisplay("j", enabled=True, file=out)
        d.update(job("Starting"))
        self.assertIn("j: 00:00", out.getvalue())
        self.assertIn("Starting", out.getvalue())
        self.assertNotIn("%", out.getvalue())
        d.update(job("Running", 40))
        d.close()
        text = out.getvalue()
        self.assertIn(" 40%", text)
        self.assertIn("ETA 1m15s", text)
        self.assertIn("loss=0.3", text)

    def test_disabled_shows_nothing(self):
        out = io.StringIO()
        d = display.JobProgressDisplay("j", enabled=False, file=out)
        d.update(job("Running", 10))
        d.close()
        self.assertEqual(out.getvalue(), "")

    def test_environment_decides(self):
        with mock.patch.dict(os.environ, {"TRAINLET_PROGRESS": "0"}):
            self.assertFalse(display.wanted())
        with mock.patch.dict(os.environ, {"TRAINLET_PROGRESS": "1"}):
            self.assertTrue(display.wanted())
        with mock.patch.dict(os.environ, {"TRAINLET_PROGRESS": ""}), \
                mock.patch.dict("sys.modules", {"ipykernel": object()}):
            self.assertTrue(display.wanted())


if __name__ == "__main__":
    unittest.main()
