"""`aws cloudformation deploy`, for a template that is already in S3: the make deploy targets'
way of deploying a release from its own URL (RELEASE=<version> BUCKET=<bucket>).

Why not `aws cloudformation deploy`: it takes a local file and uploads it under a name of its own
(`<prefix>/<md5>.template`), so the template URL CloudFormation sees is one the uploader chose,
and whoever may upload there may deploy anything. deployer.yaml's DeployerPolicy admits a stack
change only with the release's own template URL (`cloudformation:TemplateUrl`), under a prefix
the deployer cannot write; this script deploys exactly that URL.

It does what `aws cloudformation deploy` does, with the same options: a change set of type
CREATE for a new stack (or one left in REVIEW_IN_PROGRESS) and UPDATE otherwise, every parameter
of the template the call does not give kept at the stack's value (UsePreviousValue), a change set
that changes nothing deleted and reported as up to date (with --no-fail-on-empty-changeset), and
the stack waited for. Every AWS call goes through the AWS CLI given as --aws, so the operator's
own `aws` (or the tests' stand-in) runs it; this file needs nothing but Python's standard library.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time

EMPTY = ("didn't contain changes", "No updates are to be performed")


class DeployError(Exception):
    """What went wrong, said as the CLI says it; the deploy stops."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aws", required=True, help="the AWS CLI to run, as a shell word list")
    parser.add_argument("--region", required=True)
    parser.add_argument("--stack-name", required=True)
    parser.add_argument("--template-url", required=True)
    parser.add_argument("--capabilities", nargs="*", default=[])
    parser.add_argument("--role-arn")
    parser.add_argument("--parameter-overrides", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-fail-on-empty-changeset", action="store_true")
    args = parser.parse_args()
    try:
        return deploy(args)
    except DeployError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def deploy(args: argparse.Namespace) -> int:
    aws = shlex.split(args.aws)

    def call(*words: str, parse: bool = True):
        done = subprocess.run([*aws, *words, "--region", args.region] + (["--output", "json"] if parse else []),
                              text=True, capture_output=True)
        if done.returncode != 0:
            raise DeployError(done.stderr.strip() or f"aws {' '.join(words[:2])} failed ({done.returncode})")
        return json.loads(done.stdout) if parse and done.stdout.strip() else None

    given = {}
    for pair in args.parameter_overrides:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise DeployError(f"--parameter-overrides {pair!r}: give Key=Value")
        given[key] = value

    existing = describe(aws, args)
    status = existing.get("StackStatus") if existing else None
    if status == "ROLLBACK_COMPLETE":
        raise DeployError(
            f"stack {args.stack_name} is in ROLLBACK_COMPLETE (its creation failed and was rolled "
            f"back): delete it (aws cloudformation delete-stack --region {args.region} --stack-name "
            f"{args.stack_name}), fix what its events say, and deploy again")
    creating = existing is None or status == "REVIEW_IN_PROGRESS"

    summary = call("cloudformation", "get-template-summary", "--template-url", args.template_url)
    declared = [p["ParameterKey"] for p in summary.get("Parameters", [])]
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise DeployError(f"Parameters: {unknown} do not exist in the template {args.template_url}")
    previous = {p["ParameterKey"] for p in (existing or {}).get("Parameters", [])} if not creating else set()
    parameters = [{"ParameterKey": k, "ParameterValue": v} for k, v in given.items()]
    parameters += [{"ParameterKey": k, "UsePreviousValue": True}
                   for k in declared if k not in given and k in previous]

    name = f"deploy-{int(time.time())}"
    words = ["cloudformation", "create-change-set", "--stack-name", args.stack_name,
             "--change-set-name", name, "--change-set-type", "CREATE" if creating else "UPDATE",
             "--template-url", args.template_url, "--parameters", json.dumps(parameters)]
    if args.capabilities:
        words += ["--capabilities", *args.capabilities]
    if args.role_arn:
        words += ["--role-arn", args.role_arn]
    try:
        call(*words)
    except DeployError as e:
        # CloudFormation answers an empty change set by failing it (below); some front-ends
        # refuse it at once, as UpdateStack does.
        if not (any(m in str(e) for m in EMPTY) and args.no_fail_on_empty_changeset):
            raise
        print(f"No changes to deploy. Stack {args.stack_name} is up to date")
        return 0
    print(f"Waiting for changeset to be created for stack {args.stack_name} from {args.template_url}",
          flush=True)
    try:
        call("cloudformation", "wait", "change-set-create-complete", "--stack-name", args.stack_name,
             "--change-set-name", name, parse=False)
    except DeployError:
        described = call("cloudformation", "describe-change-set", "--stack-name", args.stack_name,
                         "--change-set-name", name)
        reason = (described or {}).get("StatusReason", "")
        if any(e in reason for e in EMPTY):
            call("cloudformation", "delete-change-set", "--stack-name", args.stack_name,
                 "--change-set-name", name, parse=False)
            if args.no_fail_on_empty_changeset:
                print(f"No changes to deploy. Stack {args.stack_name} is up to date")
                return 0
            raise DeployError(f"No changes to deploy. Stack {args.stack_name} is up to date")
        raise DeployError(f"the change set for {args.stack_name} failed: {reason}")
    call("cloudformation", "execute-change-set", "--stack-name", args.stack_name,
         "--change-set-name", name, parse=False)
    print(f"Waiting for stack create/update to complete for {args.stack_name}", flush=True)
    waiter = "stack-create-complete" if creating else "stack-update-complete"
    try:
        call("cloudformation", "wait", waiter, "--stack-name", args.stack_name, parse=False)
    except DeployError as e:
        raise DeployError(
            f"{e}\nthe stack did not deploy: aws cloudformation describe-stack-events --region "
            f"{args.region} --stack-name {args.stack_name} says why") from e
    print(f"Successfully created/updated stack - {args.stack_name}")
    return 0


def describe(aws: list[str], args: argparse.Namespace) -> dict | None:
    """The stack as DescribeStacks returns it, or None when there is none."""
    done = subprocess.run([*aws, "cloudformation", "describe-stacks", "--stack-name", args.stack_name,
                           "--region", args.region, "--output", "json"], text=True, capture_output=True)
    if done.returncode != 0:
        if "does not exist" in done.stderr:
            return None
        raise DeployError(done.stderr.strip())
    stacks = json.loads(done.stdout).get("Stacks", [])
    return stacks[0] if stacks else None


if __name__ == "__main__":
    sys.exit(main())
