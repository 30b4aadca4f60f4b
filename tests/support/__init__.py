"""Test support shared by every protocol's suite (and the interop matrix): live brokers."""
