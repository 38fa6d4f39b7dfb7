"""The dress rehearsal of both papers (`make rehearsal`): every app on one machine, joined, and checked."""
