"""The module's answers on what it recorded on the GPU machine (tests/fixtures/python_gpu), against labels that do not
come from allocscope: OOMs constructed to have a cause or whose cause a changed allocator setting proved, a leak
planted at a known line, and PyTorch's own counters (labels.json says which is which)."""
import json
import os
import unittest
from pathlib import Path

import allocscope

FIXTURES = Path(os.environ.get("ALLOCSCOPE_FIXTURES", Path(__file__).resolve().parents[1] / "fixtures"))
DIR = FIXTURES / "python_gpu"
LABELS = json.loads((DIR / "labels.json").read_text())


class RecordedOnTheGpu(unittest.TestCase):
    def test_every_oom_cause(self):
        for label in LABELS["ooms"]:
            with self.subTest(file=label["file"]), allocscope.load(DIR / label["file"]) as s:
                ooms = s.oom()["ooms"]
                self.assertEqual(len(ooms), 1)
                self.assertEqual(ooms[0]["cause"], label["cause"], label["why"])

    def test_fragmentation_advice_is_what_got_the_run_past_the_request(self):
        # The evidence behind hf_oom's label: under expandable segments the request that failed was allocated.
        with allocscope.load(DIR / "hf_oom.pickle.gz") as s:
            failed = s.oom()["ooms"][0]
            self.assertIn("expandable_segments:True", failed["advice"])
        with allocscope.load(DIR / "hf_oom_expandable.pickle.gz") as s:
            c = s.allocations(0)
            self.assertIn(failed["requested"], [int(v) for v in c["size"]])
            self.assertGreater(s.oom()["ooms"][0]["requested"], failed["requested"])

    def test_leaks(self):
        for label in LABELS["leaks"]:
            with self.subTest(file=label["file"]), allocscope.load(DIR / label["file"]) as s:
                a = s.leaks()
                self.assertEqual(not a.ok, label["leak"], label["why"])
                if label["leak"]:
                    lines = [g["site"]["line"] for d in a["devices"] for g in d["growing"] if g.get("site")]
                    self.assertIn(label["site_line"], lines)

    def test_peaks_equal_pytorchs_counters(self):
        for label in LABELS["peaks"]:
            with allocscope.load(DIR / label["file"]) as s:
                p = s.peak(device=0)["devices"][0]
                self.assertEqual(p["allocated"]["bytes"], label["requested_bytes_peak"])
                self.assertEqual(p["reserved"]["bytes"], label["reserved_bytes_peak"])


if __name__ == "__main__":
    unittest.main()
