"""docs/json-schemas.md against what the commands print: every key of every --json document is
listed in its command's section (and nothing listed is gone), and each document carries the
section's schema number and the build that wrote it. The recordings are those that, together,
make each command print every key it has (chosen over the whole scripts/check_identical.sh set).
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

BIN = os.environ["FRAGSCOPE_BIN"]
SOURCE = os.environ["FRAGSCOPE_SOURCE_DIR"]
DOC = os.path.join(SOURCE, "docs", "json-schemas.md")
FRACTION_OOM = "tests/data/doctor/h200_fraction_oom"


def fragscope(*args):
    done = subprocess.run([BIN, *args, "--json"], cwd=SOURCE, capture_output=True, text=True, timeout=300)
    if done.returncode not in (0, 1):
        raise AssertionError(f"fragscope {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return json.loads(done.stdout)


def key_paths(value, prefix="", out=None):
    """Every key path of a document: "a.b", "a[].b" for the elements of an array."""
    out = set() if out is None else out
    if isinstance(value, dict):
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else key
            out.add(path)
            key_paths(child, path, out)
    elif isinstance(value, list):
        for child in value:
            key_paths(child, prefix + "[]", out)
    return out


def documented():
    """{command: (schema, [key patterns])} from the page's sections and their tables."""
    sections = {}
    command = None
    for line in open(DOC, encoding="utf-8"):
        heading = re.match(r"## `(\w+)` \(schema (\d+)\)", line)
        if heading:
            command = heading.group(1)
            sections[command] = (int(heading.group(2)), [])
        elif line.startswith("## "):
            command = None
        elif command and line.startswith("| `"):
            sections[command][1].append(re.match(r"\| `([^`]+)`", line).group(1))
    common = [re.match(r"\| `([^`]+)`", l).group(1) for l in open(DOC, encoding="utf-8")
              if l.startswith("| `schema`") or l.startswith("| `build_info")]
    return sections, common


def covers(pattern, path):
    """`{name}` in a documented key stands for any key of that map."""
    regex = re.escape(pattern).replace(r"\{", "{").replace(r"\}", "}")
    return re.fullmatch(re.sub(r"\{\w+\}", r"[^.\\[\\]]+", regex), path) is not None


class JsonSchemas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        scratch = tempfile.mkdtemp()
        criteria = os.path.join(scratch, "criteria.json")
        subprocess.run([BIN, "plan", "tests/data/plan/p9/job.toml", "--criteria-out", criteria], cwd=SOURCE,
                       capture_output=True, check=False)
        snapshot = f"{FRACTION_OOM}/snapshot_at_oom.pickle.gz"
        # A second rank's snapshot cut in half by a crash: the doctor skips it and says so.
        damaged = os.path.join(scratch, "rank1_snapshot.pickle.gz")
        with open(os.path.join(SOURCE, snapshot), "rb") as whole, open(damaged, "wb") as half:
            data = whole.read()
            half.write(data[:len(data) // 2])
        cls.documents = {
            "analyze": [fragscope("analyze", snapshot),
                        fragscope("analyze", "tests/data/heldout/S_exp_round2/snapshot.pickle.gz")],
            "replay": [fragscope("replay", snapshot),
                       fragscope("replay", snapshot, "--alloc-conf", "expandable_segments:True")],
            "whatif": [fragscope("whatif", snapshot, "--threads", "2", "--min-capacity")],
            "doctor": [fragscope("doctor", FRACTION_OOM, damaged, "--threads", "2"),
                       fragscope("doctor", "tests/data/heldout/E_eval", "--threads", "2"),
                       # a run that grows: run_growth
                       fragscope("doctor", "tests/data/field/leak_lo", "--threads", "2")],
            "check": [fragscope("check", "tests/data/plan/p9/steps.jsonl", "--criteria", criteria)],
            "plan": [fragscope("plan", "examples/llama2-7b-ddp.toml", "--global-batch", "64"),
                     fragscope("plan", "examples/seed-13b.toml", "--canary")],
        }
        cls.sections, cls.common = documented()

    def test_every_command_has_a_section(self):
        self.assertEqual(sorted(self.sections), sorted(self.documents))

    def test_every_printed_key_is_documented(self):
        for command, docs in self.documents.items():
            patterns = self.sections[command][1] + self.common
            for path in sorted(set().union(*(key_paths(d) for d in docs))):
                with self.subTest(command=command, key=path):
                    self.assertTrue(any(covers(p, path) for p in patterns), f"{command}: `{path}` not in {DOC}")

    def test_every_documented_key_is_printed(self):
        for command, docs in self.documents.items():
            printed = set().union(*(key_paths(d) for d in docs))
            for pattern in self.sections[command][1]:
                with self.subTest(command=command, key=pattern):
                    self.assertTrue(any(covers(pattern, p) for p in printed), f"{command}: `{pattern}` is gone")

    def test_every_evidence_key_is_documented(self):
        """The doctor's evidence keys are data the JSON's readers filter on (scripts/doctor_projection_runs.py):
        every key a source file can add is listed in json-schemas.md and in doctor.md's --json table."""
        adds = re.compile(r'\b(?:add\(w,|add_evidence\()\s*"([a-z_0-9]+)"')
        keys = set()
        for folder, _, files in os.walk(os.path.join(SOURCE, "src")):
            for name in files:
                if name.endswith(".cpp"):
                    keys |= set(adds.findall(open(os.path.join(folder, name), encoding="utf-8").read()))
        self.assertGreater(len(keys), 30)
        for page, row in (("json-schemas.md", "| `evidence[].key`"), ("doctor.md", "| `evidence`")):
            line = next(l for l in open(os.path.join(SOURCE, "docs", page), encoding="utf-8") if l.startswith(row))
            listed = set(re.findall(r"`([a-z_0-9]+)`", line))
            for key in sorted(keys):
                with self.subTest(page=page, key=key):
                    self.assertTrue(key in listed, f"evidence key `{key}` not in docs/{page}")

    def test_schema_and_build_info(self):
        version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.split()
        for command, docs in self.documents.items():
            for doc in docs:
                with self.subTest(command=command):
                    self.assertEqual(doc["schema"], self.sections[command][0])
                    self.assertEqual(doc["build_info"]["version"], version[1])
                    self.assertEqual(doc["build_info"]["revision"], version[3].rstrip(")"))


if __name__ == "__main__":
    unittest.main()
