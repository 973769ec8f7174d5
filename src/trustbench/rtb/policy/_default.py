"""The policy of a corpus whose manifest names none (the first corpus predates the field).

A leaf module (it imports nothing), so the platform and the manifest can name the default
without importing any policy object.
"""

DEFAULT_POLICY_ID = "rtb-narrow-approval-v1"
"""Policy of a corpus (and a simulated platform) that declares none."""
