"""Check the Terraform modules and example (terraform/) without a Terraform binary.

No Terraform can be installed where this project is built and tested, so nothing here runs
`terraform init`, `plan` or `apply`. What is checked instead, for every `.tf` under terraform/:

* it parses (python-hcl2, pinned in tools/requirements.txt);
* each module under terraform/modules/ deploys its template (cloudformation/<module>.yaml) of a
  release by URL with one `aws_cloudformation_stack`: the release's template URL, the capabilities
  the template needs, the stack name the Makefile and deployer.yaml's DeployerPolicy use, and every
  template parameter passed from a variable of the same name in snake_case, whose type, default and
  description are the template's; every template output is an output of that name, with the
  template's description; no variable is neither a parameter nor one of the module's own;
* every resource, data source, provider and module block, in the modules and in the example, has
  only arguments its schema has (attributes as attributes, blocks as blocks, none that is computed
  only) and every one the schema requires; every `var.`, `local.`, `module.<name>.<output>`,
  `data.<type>.<name>.<attribute>` and `<type>.<name>.<attribute>` reference names something
  declared, with that output or attribute. The schemas are tests/fixtures/terraform/ (where each
  came from and how to regenerate it: its README.md), taken from the AWS and helm providers' and
  terraform-aws-eks's sources at the versions the example pins, which it must pin.

Usage: check_terraform.py [--root DIR]    check DIR's terraform/ (default: this checkout)
       check_terraform.py interface DIR   a module's variables and outputs as the fixture holds them

Exit 0 when every check passes, 1 with every failure listed (each with its fix) otherwise. The
end-to-end suite runs it on this checkout and on broken copies (tests/tests/e2e/terraform.rs).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

try:
    import hcl2
except ImportError:  # pragma: no cover - what the reader of a bare machine sees
    sys.exit("error: python-hcl2 is not installed: make tools (tools/requirements.txt pins it)")
import yaml

HERE = Path(__file__).resolve().parent

# The modules and the template each deploys.
MODULES = {"base": "base.yaml", "tenant": "tenant.yaml", "spoke": "spoke.yaml"}
# Each module's variables that are not template parameters: where the release is, the role
# CloudFormation deploys as, and the stack's name.
DEPLOYMENT_VARIABLES = {
    "base": ["release_bucket", "release_version", "release_prefix", "iam_role_arn", "stack_name"],
    "tenant": ["release_bucket", "release_version", "release_prefix", "iam_role_arn", "router_stack_name"],
    "spoke": ["release_bucket", "release_version", "release_prefix", "iam_role_arn", "stack_name"],
}
# The stack names the Makefile gives (STACK_NAME, <STACK_NAME>-tenant-<cluster> with '_' as '-',
# SPOKE_STACK) and DeployerPolicy admits.
STACK_NAMES = {
    "base": "${var.stack_name}",
    "tenant": '"${var.router_stack_name}-tenant-${replace(var.cluster_name, "_", "-")}"',
    "spoke": "${var.stack_name}",
}
# The release's layout (Makefile RELEASE_URL, tools/release.py).
TEMPLATE_URL = (
    '"https://${var.release_bucket}.s3.${data.aws_region.current.region}.amazonaws.com/'
    '${var.release_prefix}/${var.release_version}/%s"'
)
# A CloudFormation parameter type as a Terraform variable type, and how its value is passed.
VARIABLE_TYPES = {"String": "string", "Number": "number", "CommaDelimitedList": "list(string)"}
PASSED = {
    "String": "${var.%s}",
    "Number": "${tostring(var.%s)}",
    "CommaDelimitedList": '${join(",", var.%s)}',
}
# IAM resources with a name of their own need CAPABILITY_NAMED_IAM.
IAM_NAMES = ("RoleName", "UserName", "GroupName", "ManagedPolicyName", "InstanceProfileName")

META = {
    "resource": {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner", "connection"},
    "data": {"count", "for_each", "depends_on", "provider", "lifecycle"},
    "module": {"source", "version", "providers", "count", "for_each", "depends_on"},
    "provider": {"alias"},
}


def snake(name: str) -> str:
    """CodeS3Bucket -> code_s3_bucket, Ec2SuspectSeconds -> ec2_suspect_seconds."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def hcl_string(text: str) -> str:
    """A Terraform string literal of `text`."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("${", "$${").replace("%{", "%%{") + '"'


def literal(value):
    """The text of an HCL string literal as python-hcl2 gives it ('"…"'), or None when it is not
    one (an expression, or a string with an interpolation)."""
    if not isinstance(value, str) or len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return None
    inner = value[1:-1]
    if re.search(r"(?<!\$)\$\{|(?<!%)%\{", inner):
        return None
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
    while i < len(inner):
        c = inner[i]
        if c == "\\" and i + 1 < len(inner):
            nxt = inner[i + 1]
            if nxt in escapes:
                out.append(escapes[nxt])
                i += 2
                continue
            if nxt == "u" and i + 5 < len(inner):
                out.append(chr(int(inner[i + 2 : i + 6], 16)))
                i += 6
                continue
        out.append(c)
        i += 1
    return "".join(out).replace("$${", "${").replace("%%{", "%{")


def unwrap(expression) -> str:
    """A bare expression ('${var.x}') as written (var.x)."""
    text = str(expression)
    return text[2:-1] if text.startswith("${") and text.endswith("}") else text


def is_block(value) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, dict) and v.get("__is_block__") for v in value
    )


def name(key: str) -> str:
    return key[1:-1] if key.startswith('"') and key.endswith('"') else key


def close(word: str, choices) -> str:
    found = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {found[0]}?)" if found else ""


# ------------------------------------------------------------------ CloudFormation templates


class CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node, deep=True)}
    return {suffix: loader.construct_mapping(node, deep=True)}


CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path) -> dict:
    return yaml.load(path.read_text(), CfnLoader)


def capabilities(template: dict) -> set[str]:
    """What CloudFormation requires to create the template's resources."""
    resources = template.get("Resources", {}).values()
    iam = [r for r in resources if str(r.get("Type", "")).startswith("AWS::IAM::")]
    needed = set()
    if iam:
        named = any(p in (r.get("Properties") or {}) for r in iam for p in IAM_NAMES)
        needed.add("CAPABILITY_NAMED_IAM" if named else "CAPABILITY_IAM")
    if "Transform" in template:
        needed.add("CAPABILITY_AUTO_EXPAND")
    return needed


def template_default(kind: str, value):
    """A parameter's Default as the variable's default (a Python value)."""
    if kind == "Number":
        return float(value)
    if kind == "CommaDelimitedList":
        return [s for s in str(value).split(",")]
    return str(value)


def hcl_default(kind: str, value) -> str:
    if kind == "Number":
        return str(value)
    if kind == "CommaDelimitedList":
        return "[" + ", ".join(hcl_string(s) for s in str(value).split(",")) + "]"
    return hcl_string(str(value))


def variable_default(kind: str, value):
    """A variable's default as python-hcl2 gives it, as template_default's value (or why not)."""
    if kind == "Number":
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    if kind == "CommaDelimitedList":
        if isinstance(value, list):
            items = [literal(v) for v in value]
            return items if None not in items else value
        return value
    text = literal(value)
    return text if text is not None else value


# ------------------------------------------------------------------ a directory of .tf files


class Directory:
    """The .tf files of one module (or example): their declarations, merged."""

    def __init__(self, root: Path, path: Path, errors: list[str]):
        self.root = root
        self.path = path
        self.rel = path.relative_to(root).as_posix()
        self.files: dict[str, dict] = {}
        for tf in sorted(path.glob("*.tf")):
            rel = tf.relative_to(root).as_posix()
            try:
                self.files[rel] = hcl2.loads(tf.read_text())
            except Exception as e:  # python-hcl2 raises lark's errors, among others
                errors.append(f"{rel}: does not parse as HCL: {str(e).strip().splitlines()[0]}")
        self.variables: dict[str, dict] = {}
        self.outputs: dict[str, dict] = {}
        self.locals: set[str] = set()
        self.resources: list[tuple[str, str, str, dict]] = []  # (file, type, name, body)
        self.data: list[tuple[str, str, str, dict]] = []
        self.modules: list[tuple[str, str, dict]] = []
        self.providers: list[tuple[str, str, dict]] = []
        self.terraform: list[tuple[str, dict]] = []
        for rel, doc in self.files.items():
            for entry in doc.get("variable", []):
                for key, body in entry.items():
                    self.variables[name(key)] = body
            for entry in doc.get("output", []):
                for key, body in entry.items():
                    self.outputs[name(key)] = body
            for entry in doc.get("locals", []):
                self.locals.update(k for k in entry if not k.startswith("__"))
            for kind, into in (("resource", self.resources), ("data", self.data)):
                for entry in doc.get(kind, []):
                    for rtype, named in entry.items():
                        for rname, body in named.items():
                            if not rname.startswith("__"):
                                into.append((rel, name(rtype), name(rname), body))
            for entry in doc.get("module", []):
                for key, body in entry.items():
                    self.modules.append((rel, name(key), body))
            for entry in doc.get("provider", []):
                for key, body in entry.items():
                    self.providers.append((rel, name(key), body))
            for body in doc.get("terraform", []):
                self.terraform.append((rel, body))


# ------------------------------------------------------------------ schemas


class Schemas:
    """tests/fixtures/terraform/: each provider's schema (Terraform's `providers schema -json`
    shape) and each registry module's variables and outputs."""

    def __init__(self, root: Path):
        fixtures = root / "tests/fixtures/terraform"
        self.providers: dict[str, dict] = {}  # local name (aws) -> fixture
        self.modules: dict[str, dict] = {}  # registry source -> interface
        self.module_version: dict[str, str] = {}
        for path in sorted(fixtures.glob("provider-*.json")):
            fixture = json.loads(path.read_text())
            self.providers[fixture["name"]] = fixture
        for path in sorted(fixtures.glob("module-*.json")):
            fixture = json.loads(path.read_text())
            for source, interface in fixture["modules"].items():
                self.modules[source] = interface
                self.module_version[source] = fixture["version"]

    def resource(self, kind: str, rtype: str):
        provider = self.providers.get(rtype.split("_", 1)[0])
        if provider is None:
            return None
        section = "resource_schemas" if kind == "resource" else "data_source_schemas"
        return provider["schema"][section].get(rtype)


def check_body(where: str, body: dict, block: dict, errors: list[str], meta=frozenset()):
    """`body` (python-hcl2's) against a schema block (Terraform's schema JSON)."""
    attributes = block.get("attributes", {})
    blocks = block.get("block_types", {})
    if block.get("unrecorded"):
        errors.append(f"{where}: its contents are not in the schema fixture: add them from the provider's source")
        return
    for key, value in body.items():
        if key.startswith("__") or key in meta:
            continue
        if key in attributes:
            attribute = attributes[key]
            if attribute.get("computed") and not (attribute.get("optional") or attribute.get("required")):
                errors.append(f"{where}: {key} is computed by the provider: it cannot be set")
            elif is_block(value):
                errors.append(
                    f"{where}: {key} is an attribute, not a block: write {key} = {{ … }}"
                )
            elif "nested_type" in attribute:
                nested = attribute["nested_type"]
                items = value if nested.get("nesting_mode") in ("list", "set") else [value]
                if isinstance(items, list):
                    for n, item in enumerate(items):
                        if isinstance(item, dict):
                            check_body(f"{where}.{key}[{n}]" if len(items) > 1 else f"{where}.{key}",
                                       item, {"attributes": nested["attributes"]}, errors)
        elif key in blocks:
            if not is_block(value):
                errors.append(f"{where}: {key} is a block, not an attribute: write {key} {{ … }}")
                continue
            for item in value:
                check_body(f"{where}.{key}", item, blocks[key].get("block", {}), errors)
        else:
            errors.append(f"{where}: no argument {key}{close(key, set(attributes) | set(blocks))}")
    for key, attribute in attributes.items():
        if attribute.get("required") and key not in body:
            errors.append(f"{where}: the required argument {key} is missing")
    for key, nested in blocks.items():
        if nested.get("min_items", 0) > 0 and key not in body:
            errors.append(f"{where}: the required block {key} is missing")


def attribute_names(block: dict) -> set[str]:
    return set(block.get("attributes", {})) | set(block.get("block_types", {}))


def expressions(value):
    """Every interpolated expression in a value (the text of each `${…}`, `$${` left out)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not k.startswith("__"):
                yield from expressions(v)
    elif isinstance(value, list):
        for v in value:
            yield from expressions(v)
    elif isinstance(value, str):
        i = 0
        while True:
            i = value.find("${", i)
            if i < 0:
                return
            if i > 0 and value[i - 1] == "$":
                i += 2
                continue
            depth, j = 0, i + 1
            in_string = False
            while j < len(value):
                c = value[j]
                if c == "\\" and in_string:
                    j += 2
                    continue
                if c == '"':
                    in_string = not in_string
                elif not in_string and c == "{":
                    depth += 1
                elif not in_string and c == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            yield value[i + 2 : j]
            i = j + 1


def references(expression: str):
    """(kind, parts) of each reference in an expression, string literals inside it left out."""
    code = re.sub(r'"(?:\\.|[^"\\])*"', '""', expression)
    for m in re.finditer(r"(?<![\w.])(var|local|module|data)\.(\w+)(?:\.(\w+))?(?:\.(\w+))?", code):
        yield m.group(1), [g for g in m.groups()[1:] if g]
    for m in re.finditer(r"(?<![\w.])((?:aws|helm)_\w+)\.(\w+)\.(\w+)", code):
        yield "resource", [m.group(1), m.group(2), m.group(3)]


# ------------------------------------------------------------------ the checks


def module_interface(directory: Directory) -> dict:
    return {
        "variables": {k: {"required": "default" not in v} for k, v in sorted(directory.variables.items())},
        "outputs": sorted(directory.outputs),
    }


def check_references(directory: Directory, interfaces: dict[str, dict], schemas: Schemas, errors: list[str]):
    declared_resources = {(t, n): t for _, t, n, _ in directory.resources}
    declared_data = {(t, n): t for _, t, n, _ in directory.data}
    modules = {n for _, n, _ in directory.modules}
    for rel, doc in directory.files.items():
        for expression in expressions(doc):
            for kind, parts in references(expression):
                where = f"{rel}: {'.'.join(parts) if kind == 'resource' else kind + '.' + '.'.join(parts)}"
                if kind == "var" and parts[0] not in directory.variables:
                    errors.append(f"{where}: no variable {parts[0]}{close(parts[0], directory.variables)}")
                elif kind == "local" and parts[0] not in directory.locals:
                    errors.append(f"{where}: no local {parts[0]}")
                elif kind == "module":
                    if parts[0] not in modules:
                        errors.append(f"{where}: no module {parts[0]}{close(parts[0], modules)}")
                    elif len(parts) > 1 and parts[0] in interfaces:
                        outputs = interfaces[parts[0]]["outputs"]
                        if parts[1] not in outputs:
                            errors.append(
                                f"{where}: module {parts[0]} has no output {parts[1]}{close(parts[1], outputs)}"
                            )
                elif kind == "data" and len(parts) >= 2:
                    if (parts[0], parts[1]) not in declared_data:
                        errors.append(f"{where}: no data source {parts[0]}.{parts[1]}")
                    elif len(parts) > 2:
                        schema = schemas.resource("data", parts[0])
                        if schema and parts[2] not in attribute_names(schema["block"]):
                            errors.append(
                                f"{where}: {parts[0]} has no attribute {parts[2]}"
                                f"{close(parts[2], attribute_names(schema['block']))}"
                            )
                elif kind == "resource":
                    if (parts[0], parts[1]) not in declared_resources:
                        errors.append(f"{where}: no resource {parts[0]}.{parts[1]}")
                    else:
                        schema = schemas.resource("resource", parts[0])
                        if schema and parts[2] not in attribute_names(schema["block"]) | {"id"}:
                            errors.append(
                                f"{where}: {parts[0]} has no attribute {parts[2]}"
                                f"{close(parts[2], attribute_names(schema['block']))}"
                            )


def check_directory(root: Path, directory: Directory, schemas: Schemas, errors: list[str], summary: list[str]):
    """Every block of `directory` against its schema, and every reference in it."""
    interfaces: dict[str, dict] = {}
    checked_modules = []
    for rel, mname, body in directory.modules:
        where = f"{rel}: module {mname}"
        source = literal(body.get("source"))
        if source is None:
            errors.append(f"{where}: source must be a string literal")
            continue
        if source.startswith("./") or source.startswith("../"):
            local = (directory.path / source).resolve()
            if not local.is_dir() or root.resolve() not in local.parents:
                errors.append(f"{where}: {source} is not a module of this checkout")
                continue
            interface = module_interface(Directory(root, local, errors))
            if "version" in body:
                errors.append(f"{where}: a local module takes no version")
            label = source
        else:
            interface = schemas.modules.get(source)
            if interface is None:
                errors.append(
                    f"{where}: {source} is not in tests/fixtures/terraform/ (its variables and outputs, "
                    "at the version pinned: python3 tools/check_terraform.py interface <its directory>)"
                )
                continue
            pinned = schemas.module_version[source]
            version = literal(body.get("version"))
            if version != pinned:
                errors.append(f"{where}: version must pin {pinned}, the version the fixture was taken from (is {version})")
            label = f"{source} {pinned}"
        interfaces[mname] = interface
        variables = interface["variables"]
        for key in body:
            if key.startswith("__") or key in META["module"]:
                continue
            if key not in variables:
                errors.append(f"{where}: {label} has no input {key}{close(key, variables)}")
        for key, variable in variables.items():
            if variable["required"] and key not in body:
                errors.append(f"{where}: {label}'s required input {key} is missing")
        checked_modules.append(label)

    checked = []
    for kind, declared in (("resource", directory.resources), ("data", directory.data)):
        for rel, rtype, rname, body in declared:
            schema = schemas.resource(kind, rtype)
            what = f"{kind} {rtype}.{rname}" if kind == "resource" else f"data {rtype}.{rname}"
            if schema is None:
                errors.append(f"{rel}: {what}: {rtype} is not in tests/fixtures/terraform/ (add its schema)")
                continue
            check_body(f"{rel}: {what}", body, schema["block"], errors, META[kind])
            checked.append(f"{'data ' if kind == 'data' else ''}{rtype}")
    for rel, pname, body in directory.providers:
        fixture = schemas.providers.get(pname)
        if fixture is None:
            errors.append(f"{rel}: provider {pname} is not in tests/fixtures/terraform/")
            continue
        check_body(f"{rel}: provider {pname}", body, fixture["schema"]["provider"]["block"], errors, META["provider"])
        checked.append(f"provider {pname}")
    # The providers' versions: an example pins the fixture's; a module takes a range.
    for rel, body in directory.terraform:
        for required in body.get("required_providers", []):
            for pname, spec in required.items():
                if pname.startswith("__"):
                    continue
                fixture = schemas.providers.get(pname)
                if fixture is None:
                    errors.append(f"{rel}: required provider {pname} is not in tests/fixtures/terraform/")
                    continue
                if literal(spec.get("source")) != fixture["source"]:
                    errors.append(f"{rel}: provider {pname}'s source must be {fixture['source']}")
                version = literal(spec.get("version"))
                if directory.rel.startswith("terraform/examples/") and version != fixture["version"]:
                    errors.append(
                        f"{rel}: provider {pname} must be pinned to {fixture['version']}, the version its "
                        f"schema fixture was taken from (is {version})"
                    )
    check_references(directory, interfaces, schemas, errors)
    things = sorted(set(checked))
    summary.append(
        f"{directory.rel}: {', '.join(things) or 'no resource'}"
        + (f"; modules {', '.join(checked_modules)}" if checked_modules else "")
        + " checked against their schemas"
    )


def check_module(root: Path, module: str, directory: Directory, errors: list[str], summary: list[str]):
    """A module against the template it deploys."""
    template_file = MODULES[module]
    template = load_template(root / "cloudformation" / template_file)
    parameters = template.get("Parameters", {})
    outputs = template.get("Outputs", {})
    where = directory.rel
    stacks = [(rel, n, body) for rel, t, n, body in directory.resources if t == "aws_cloudformation_stack"]
    if len(stacks) != 1:
        errors.append(f"{where}: deploys {len(stacks)} aws_cloudformation_stack resources, not one")
        return
    rel, sname, stack = stacks[0]
    at = f"{rel}: aws_cloudformation_stack.{sname}"
    if stack.get("name") != STACK_NAMES[module]:
        errors.append(f"{at}: name must be {unwrap(STACK_NAMES[module])}, as the Makefile names it and DeployerPolicy admits (is {stack.get('name')})")
    url = TEMPLATE_URL % template_file
    if stack.get("template_url") != url:
        errors.append(
            f"{at}: template_url must be the release's {template_file}: {url} (is {stack.get('template_url')})"
        )
    if "template_body" in stack:
        errors.append(f"{at}: template_body: the module deploys the release's template by template_url")
    given = stack.get("capabilities")
    given = {literal(c) for c in given} if isinstance(given, list) else given
    needed = capabilities(template)
    if given != needed:
        errors.append(f"{at}: capabilities must be {sorted(needed)}, what {template_file} needs (are {given})")
    if stack.get("iam_role_arn") != "${var.iam_role_arn}":
        errors.append(f"{at}: iam_role_arn must be var.iam_role_arn")

    passed = stack.get("parameters")
    passed = passed if isinstance(passed, dict) else {}
    expected_variables = set(DEPLOYMENT_VARIABLES[module])
    for key, parameter in parameters.items():
        kind = parameter.get("Type", "String")
        variable = snake(key)
        expected_variables.add(variable)
        if kind not in VARIABLE_TYPES:
            errors.append(f"{where}: {template_file}'s parameter {key} has type {kind}, which no variable type stands for here")
            continue
        value = PASSED[kind] % variable
        if key not in passed:
            errors.append(f"{at}: {template_file}'s parameter {key} is not in parameters: add {key} = {unwrap(value)}")
        elif passed[key] != value:
            errors.append(f"{at}: parameters.{key} must be {unwrap(value)} (is {passed[key]})")
        declared = directory.variables.get(variable)
        if declared is None:
            block = [f'variable "{variable}" {{', f"  description = {hcl_string(str(parameter.get('Description', '')))}",
                     f"  type        = {VARIABLE_TYPES[kind]}"]
            if "Default" in parameter:
                block.append(f"  default     = {hcl_default(kind, parameter['Default'])}")
            block.append("}")
            errors.append(
                f"{where}: {template_file}'s parameter {key} has no variable {variable}: add to variables.tf\n"
                + "\n".join("    " + line for line in block)
            )
            continue
        if unwrap(declared.get("type")) != VARIABLE_TYPES[kind]:
            errors.append(f"{where}: variable {variable}'s type must be {VARIABLE_TYPES[kind]} ({key} is a {kind}; is {unwrap(declared.get('type'))})")
        if "Default" in parameter:
            want = template_default(kind, parameter["Default"])
            if "default" not in declared:
                errors.append(f"{where}: variable {variable} has no default; {template_file}'s {key} defaults to {hcl_default(kind, parameter['Default'])}")
            elif variable_default(kind, declared["default"]) != want:
                errors.append(
                    f"{where}: variable {variable}'s default is {declared['default']}; {template_file}'s {key} "
                    f"defaults to {hcl_default(kind, parameter['Default'])}"
                )
        elif "default" in declared:
            errors.append(f"{where}: variable {variable} has a default, but {template_file}'s {key} has none (it is required)")
        description = literal(declared.get("description"))
        if description != parameter.get("Description"):
            errors.append(
                f"{where}: variable {variable}'s description must be {template_file}'s {key}'s: "
                f"{hcl_string(str(parameter.get('Description')))}"
            )
    for key in passed:
        if not key.startswith("__") and key not in parameters:
            errors.append(f"{at}: parameters.{key}: {template_file} has no parameter {key}{close(key, parameters)}")
    for variable in directory.variables:
        if variable not in expected_variables:
            errors.append(
                f"{where}: variable {variable} is neither a parameter of {template_file} nor one of the "
                f"module's own ({', '.join(DEPLOYMENT_VARIABLES[module])})"
            )
    for variable in DEPLOYMENT_VARIABLES[module]:
        declared = directory.variables.get(variable)
        if declared is None:
            errors.append(f"{where}: the module's own variable {variable} is missing")
        elif literal(declared.get("description")) in (None, ""):
            errors.append(f"{where}: variable {variable} has no description")

    for key, output in outputs.items():
        oname = snake(key)
        if "Condition" in output:
            value = f'${{lookup(aws_cloudformation_stack.{sname}.outputs, "{key}", null)}}'
        else:
            value = f'${{aws_cloudformation_stack.{sname}.outputs["{key}"]}}'
        declared = directory.outputs.get(oname)
        if declared is None:
            errors.append(
                f"{where}: {template_file}'s output {key} has no output {oname}: add to outputs.tf\n"
                f'    output "{oname}" {{\n      description = {hcl_string(str(output.get("Description", "")))}\n'
                f"      value       = {unwrap(value)}\n    }}"
            )
            continue
        if declared.get("value") != value:
            errors.append(f"{where}: output {oname} must be {unwrap(value)} (is {declared.get('value')})")
        if literal(declared.get("description")) != output.get("Description"):
            errors.append(
                f"{where}: output {oname}'s description must be {template_file}'s {key}'s: "
                f"{hcl_string(str(output.get('Description')))}"
            )
    for oname in directory.outputs:
        if oname not in {snake(k) for k in outputs}:
            errors.append(f"{where}: output {oname} is not an output of {template_file}")
    summary.append(
        f"{where}: {len(parameters)} parameters, {len(outputs)} outputs of cloudformation/{template_file}"
        f", capabilities {', '.join(sorted(needed))}"
    )


def check(root: Path) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    summary: list[str] = []
    schemas = Schemas(root)
    terraform = root / "terraform"
    dirs = sorted({p.parent for p in terraform.rglob("*.tf") if ".terraform" not in p.parts})
    if not dirs:
        errors.append(f"{terraform}: no .tf files")
    for path in dirs:
        directory = Directory(root, path, errors)
        rel = directory.rel
        if rel.startswith("terraform/modules/"):
            module = rel.split("/")[2]
            if module not in MODULES:
                errors.append(f"{rel}: no template is known for this module (tools/check_terraform.py MODULES)")
            else:
                check_module(root, module, directory, errors, summary)
        check_directory(root, directory, schemas, errors, summary)
    for module in MODULES:
        if not (terraform / "modules" / module).is_dir():
            errors.append(f"terraform/modules/{module}: missing (it deploys cloudformation/{MODULES[module]})")
    return errors, summary


def main(argv: list[str]) -> int:
    if argv[:1] == ["interface"]:
        if len(argv) != 2:
            print("usage: check_terraform.py interface <module directory>", file=sys.stderr)
            return 2
        path = Path(argv[1]).resolve()
        errors: list[str] = []
        interface = module_interface(Directory(path.parent, path, errors))
        if errors:
            print("\n".join(errors), file=sys.stderr)
            return 1
        print(json.dumps(interface, indent=2))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE.parent, help="the checkout (default: this one)")
    args = parser.parse_args(argv)
    errors, summary = check(args.root.resolve())
    for line in summary:
        print(f"  checked  {line}")
    if errors:
        for line in errors:
            print(f"  FAIL  {line}")
        print(f"FAIL: {len(errors)} problem(s) in terraform/ (no Terraform binary was run: docs/terraform.md)")
        return 1
    print("PASS: terraform/ parses, maps every template parameter and output, and passes the schemas "
          "(no Terraform binary was run: docs/terraform.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
