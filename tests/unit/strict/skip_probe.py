"""Not a test of the product: tests/unit/strict/selfcheck.sh runs it to check that every way a
GdbTestCase can skip fails in strict mode unless allowed (3 failures), and skips otherwise."""
import unittest

from gdbtest import GdbTestCase, require


class StrictSkipProbe(GdbTestCase):
    def test_require(self):
        require(self, False, "deliberately skipped", key="selfcheck")

    def test_skip_test(self):
        self.skipTest("[selfcheck] deliberately skipped")

    @unittest.skipIf(True, "[selfcheck] deliberately skipped")
    def test_skip_decorator(self):
        pass


if __name__ == "__main__":
    unittest.main()
