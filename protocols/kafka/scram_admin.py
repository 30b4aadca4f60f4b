"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) on the SCRAM file.

kafka-configs and the admin clients salt and hash the password themselves and send the
SaltedPassword; the broker keeps the keys derived from it (core/auth/scram.py), never a
password. Both need an admin account when accounts are checked (SASL or aclEnable): with
aclEnable and no SASL an unauthenticated client is refused, as for the ACL APIs, since a
credential set then would log in once SASL is turned on.
"""

from __future__ import annotations

from typing import Any

from rocketport.core.auth.scram import (MECHANISMS, MIN_ITERATIONS, ScramCredentials,
                                        credential_from_salted)

from .errors import ErrorCode
from .requests import Handler, RequestContext
from .schema import ApiKey

BY_CODE = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism ids
CODE_OF = {name: code for code, name in BY_CODE.items()}
MAX_ITERATIONS = 16384  # Kafka's ceiling


class ScramAdminHandlers:
    def __init__(self, credentials: ScramCredentials, accounts_checked: bool) -> None:
        self.credentials = credentials
        self.accounts_checked = accounts_checked
        self.table: dict[int, Handler] = {ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self._describe,
                                          ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self._alter}

    async def _describe(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        if not self._admin(ctx):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": "describing SCRAM credentials needs an admin account", "results": []}
        known = self.credentials.users()
        # null or empty: every user (as Kafka; librdkafka sends an empty list)
        names = sorted(known) if not body["users"] else [u["name"] for u in body["users"]]
        results = []
        for name in names:
            infos = [{"mechanism": CODE_OF[m], "iterations": i} for m, i in known.get(name, []) if m in CODE_OF]
            results.append({"user": name, "error_code": ErrorCode.NONE if infos else ErrorCode.RESOURCE_NOT_FOUND,
                            "error_message": None if infos else "Attempt to describe a user credential that does not exist",
                            "credential_infos": infos})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}

    async def _alter(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        results = []
        for entry in body["deletions"]:
            code, message = self._check(ctx, entry["mechanism"])
            if code == ErrorCode.NONE and not self.credentials.delete(entry["name"], BY_CODE[entry["mechanism"]]):
                code, message = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            results.append({"user": entry["name"], "error_code": code, "error_message": message})
        for entry in body["upsertions"]:
            code, message = self._check(ctx, entry["mechanism"])
            if code == ErrorCode.NONE and not MIN_ITERATIONS <= entry["iterations"] <= MAX_ITERATIONS:
                code, message = ErrorCode.UNACCEPTABLE_CREDENTIAL, \
                    f"iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}"
            if code == ErrorCode.NONE:
                mechanism = BY_CODE[entry["mechanism"]]
                self.credentials.put(entry["name"], mechanism, credential_from_salted(
                    mechanism, bytes(entry["salt"]), bytes(entry["salted_password"]), entry["iterations"]))
            results.append({"user": entry["name"], "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "results": results}

    def _admin(self, ctx: RequestContext) -> bool:
        if ctx.principal is None:  # no login: open only where no accounts are checked (as Kafka without an authorizer)
            return not self.accounts_checked
        return ctx.principal.admin

    def _check(self, ctx: RequestContext, mechanism: int) -> tuple[int, str | None]:
        if not self._admin(ctx):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "altering SCRAM credentials needs an admin account"
        if mechanism not in BY_CODE or BY_CODE[mechanism] not in MECHANISMS:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism {mechanism}"
        return ErrorCode.NONE, None
