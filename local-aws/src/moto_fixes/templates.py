# Part of moto_fixes (templates): CloudFormation's resources as CloudFormation makes them: lists
# without AWS::NoValue, managed policies, keys, functions, rules, conditions on update, dependents
# deleted first.
# moto.rs concatenates mod.py, templates.py, sqs.py, stacks.py and apis.py, in that order, into
# one sitecustomize.py; the names this part uses are mod.py's.
def _no_value_dropped_from_lists():
    """Has moto's CloudFormation drop a list element that resolves to AWS::NoValue."""
    resolve = _cfn.clean_json

    def yields_no_value(value):
        return isinstance(value, dict) and (
            value.get("Ref") == "AWS::NoValue" or "Fn::If" in value
        )

    def clean_json(resource_json, resources_map):
        if isinstance(resource_json, list):
            cleaned = []
            for value in resource_json:
                resolved = clean_json(value, resources_map)
                if resolved is None and yields_no_value(value):
                    continue
                cleaned.append(resolved)
            return cleaned
        return resolve(resource_json, resources_map)

    _cfn.clean_json = clean_json


if _cfn is not None:
    _no_value_dropped_from_lists()


def _update_by_name(update, cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    """Calls moto's own update_from_cloudformation_json, which moto's CloudFormation calls by name."""
    return update(
        cls,
        original_resource=original_resource,
        new_resource_name=new_resource_name,
        cloudformation_json=cloudformation_json,
        account_id=account_id,
        region_name=region_name,
    )


def _fix_cloudformation_properties(model, fix):
    """Has moto's CloudFormation create `model` from its Properties after `fix(properties)`."""
    create = model.create_from_cloudformation_json.__func__

    def create_fixed(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        properties = cloudformation_json.get("Properties")
        if isinstance(properties, dict):
            fix(properties)
        return create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)

    model.create_from_cloudformation_json = classmethod(create_fixed)


def _policy_document_as_iam_keeps_it(properties):
    document = properties.get("PolicyDocument")
    if isinstance(document, str):
        document = properties["PolicyDocument"] = json.loads(document)
    if isinstance(document, dict) and isinstance(document.get("Statement"), list):
        document["Statement"] = [s for s in document["Statement"] if s is not None]


def _key_policy_as_json(properties):
    policy = properties.get("KeyPolicy")
    if isinstance(policy, dict):
        properties["KeyPolicy"] = json.dumps(policy)


if _iam is not None:
    _fix_cloudformation_properties(_iam.ManagedPolicy, _policy_document_as_iam_keeps_it)

if _kms is not None:
    _fix_cloudformation_properties(_kms.Key, _key_policy_as_json)


def _managed_policy_updated_in_place(model):
    """Has moto's CloudFormation update a managed policy as CloudFormation does: a new default
    version (IAM keeps five: the oldest other one goes first) and its role, group and user
    attachments as listed; or, when its Path changes (create-only: tenant.yaml's grant names its
    queue and key in it), a new policy under the new path, attached as listed, and the old one
    detached and deleted."""

    def update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        properties = cloudformation_json.get("Properties") or {}
        _policy_document_as_iam_keeps_it(properties)
        policy = original_resource
        backend = policy.backend
        if properties.get("Path", "/") != policy.path:
            replacement = cls.create_from_cloudformation_json(
                new_resource_name, cloudformation_json, account_id, region_name
            )
            for holders, detach, argument in [
                (backend.roles.values(), backend.detach_role_policy, "role_name"),
                (backend.groups.values(), backend.detach_group_policy, "group_name"),
                (backend.users.values(), backend.detach_user_policy, "user_name"),
            ]:
                for holder in [h for h in holders if policy.arn in h.managed_policies]:
                    detach(policy_arn=policy.arn, **{argument: holder.name})
            backend.delete_policy(policy.arn)
            return replacement
        document = json.dumps(properties.get("PolicyDocument"))
        default = next(v for v in policy.versions if v.version_id == policy.default_version_id)
        if json.loads(document) != json.loads(default.document):
            others = [v for v in policy.versions if not v.is_default]
            if len(policy.versions) >= 5 and others:
                backend.delete_policy_version(policy.arn, others[0].version_id)
            backend.create_policy_version(policy.arn, document, True)
        kinds = [
            ("Roles", backend.roles.values(), backend.attach_role_policy, backend.detach_role_policy, "role_name"),
            ("Groups", backend.groups.values(), backend.attach_group_policy, backend.detach_group_policy, "group_name"),
            ("Users", backend.users.values(), backend.attach_user_policy, backend.detach_user_policy, "user_name"),
        ]
        for key, holders, attach, detach, argument in kinds:
            listed = set(properties.get(key) or [])
            attached = {h.name for h in holders if policy.arn in h.managed_policies}
            for holder in sorted(listed - attached):
                attach(policy_arn=policy.arn, **{argument: holder})
            for holder in sorted(attached - listed):
                detach(policy_arn=policy.arn, **{argument: holder})
        return policy

    model.update_from_cloudformation_json = classmethod(update)


if _iam is not None:
    _managed_policy_updated_in_place(_iam.ManagedPolicy)


def _function_tagged(model):
    """Has moto's CloudFormation tag a function it creates or updates with the template's Tags."""
    create = model.create_from_cloudformation_json.__func__
    update = model.update_from_cloudformation_json.__func__

    def strings(cloudformation_json):
        variables = ((cloudformation_json.get("Properties") or {}).get("Environment") or {}).get(
            "Variables"
        ) or {}
        for key, value in list(variables.items()):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                variables[key] = str(value)

    def tag(function, cloudformation_json):
        tags = (cloudformation_json.get("Properties") or {}).get("Tags") or []
        function.tags.update({t["Key"]: t["Value"] for t in tags if "Key" in t and "Value" in t})
        return function

    def create_tagged(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        strings(cloudformation_json)
        function = create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        return tag(function, cloudformation_json)

    # moto's CloudFormation passes these by name.
    def update_tagged(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        strings(cloudformation_json)
        function = _update_by_name(
            update, cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
        )
        return tag(function, cloudformation_json)

    model.create_from_cloudformation_json = classmethod(create_tagged)
    model.update_from_cloudformation_json = classmethod(update_tagged)


if _lambda is not None:
    _function_tagged(_lambda.LambdaFunction)


def _update_only_what_the_conditions_create(update):
    def update_if_created(logical_id, resource_json, resources_map, *args, **kwargs):
        condition = resource_json.get("Condition")
        if condition and not resources_map.lazy_condition_map[condition]:
            return None
        return update(logical_id, resource_json, resources_map, *args, **kwargs)

    return update_if_created


if _cfn is not None:
    _cfn.parse_and_update_resource = _update_only_what_the_conditions_create(
        _cfn.parse_and_update_resource
    )


def _references(resource_json, names):
    """The logical ids among `names` that a resource's JSON refers to or depends on."""
    found = set()

    def walk(value):
        if isinstance(value, list):
            for item in value:
                walk(item)
        if not isinstance(value, dict):
            return
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str):
                found.add(item)
            elif key == "Fn::GetAtt":
                target = item[0] if isinstance(item, list) and item else item
                if isinstance(target, str):
                    found.add(target.split(".")[0])
            elif key == "Fn::Sub":
                template = item[0] if isinstance(item, list) and item else item
                if isinstance(template, str):
                    for name in re.findall(r"\$\{([^}!][^}]*)\}", template):
                        found.add(name.split(".")[0])
            walk(item)

    walk(resource_json)
    depends = resource_json.get("DependsOn", [])
    found.update([depends] if isinstance(depends, str) else depends)
    return found & names


def _delete_dependents_first(resources):
    """Deletes the stack's resources as CloudFormation does: a resource once no other resource
    left refers to it; a pass that deletes nothing ends with the last error, as moto's does."""
    names = set(resources._resource_json_map)
    needs = {
        name: _references(json_, names) - {name}
        for name, json_ in resources._resource_json_map.items()
    }
    remaining = {
        name
        for name, json_ in resources._resource_json_map.items()
        if json_.get("DeletionPolicy") != "Retain"
    }
    last_error = None
    while remaining:
        ready = sorted(
            n for n in remaining if not any(n in needs[m] for m in remaining if m != n)
        ) or sorted(remaining)  # a cycle CloudFormation would refuse: moto's order then
        deleted = set()
        for name in ready:
            parsed = resources._parsed_resources.get(name)
            try:
                if parsed is not None and not isinstance(parsed, str):
                    resources._delete_resource(parsed, resources._resource_json_map[name])
                    resources._parsed_resources.pop(name)
            except Exception as error:  # noqa: BLE001 -- moto's own delete retries these
                last_error = error
            else:
                deleted.add(name)
        if not deleted:
            raise last_error
        remaining -= deleted


if _cfn is not None:
    _cfn.ResourceMap.delete = _delete_dependents_first


def _rule_updated_in_place(model):
    """Has moto's CloudFormation update a rule in place when its Name and bus stay."""
    replace = model.update_from_cloudformation_json.__func__

    # moto's CloudFormation passes these by name.
    def update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        properties = cloudformation_json.get("Properties") or {}
        name = properties.get("Name", original_resource.name)
        bus = str(properties.get("EventBusName", "default")).split("/")[-1]
        if name != original_resource.name or bus != original_resource.event_bus_name:
            return _update_by_name(
                replace, cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
            )
        # PutRule on an existing rule keeps its targets; PutTargets replaces those by Id.
        rule = cls.create_from_cloudformation_json(
            original_resource.name, cloudformation_json, account_id, region_name
        )
        kept = {t["Id"] for t in properties.get("Targets", [])}
        gone = [t["Id"] for t in rule.targets if t["Id"] not in kept]
        if gone:
            rule.remove_targets(gone)
        return rule

    model.update_from_cloudformation_json = classmethod(update)


if _events is not None:
    _rule_updated_in_place(_events.Rule)

