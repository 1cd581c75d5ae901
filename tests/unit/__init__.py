"""Unit tests, one folder a package folder, on FAKE engines (tests/fakes/)."""
