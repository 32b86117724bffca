"""What the Python GPU tests share: a rank's tally of checks. Each check that
fails prints one line naming the rank; the test's summary reads the counts.
The tests import it from their own directory (a script's directory is first
on sys.path)."""


class Job:
    def __init__(self, comm):
        self.comm, self.passed, self.failed = comm, 0, 0

    def expect(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print(f"rank {self.comm.rank}: FAIL {what}", flush=True)
