"""Loaded into the moto server as `sitecustomize` (its directory on PYTHONPATH): where moto 5.2.5
answers otherwise than AWS, and a stand-in of the project's depends on AWS's answer, it answers as
AWS does. Each fix says what AWS does and where moto differs.

* AWS::IAM::ManagedPolicy with a PolicyDocument given as a JSON string. CloudFormation takes a
  policy document as an object or as a JSON string (its Json type); Karpenter's getting-started
  template writes every controller policy as a `!Sub |` JSON string. moto json.dumps the string a
  second time and refuses the result ("Syntax errors in policy"), so that template cannot be
  deployed. Parsed here into the object moto expects.
* AWS::IAM::ManagedPolicy with `!If [condition, statement, !Ref AWS::NoValue]` in its Statement
  list (tenant.yaml's kms:Decrypt grant). CloudFormation drops the element; moto leaves a null
  in the list and refuses the document ("Syntax errors in policy"). Dropped here.
* AWS::KMS::Key with its KeyPolicy as an object (CloudFormation's Json type, the way
  base.yaml and tenant.yaml write it). moto stores the object as the key's policy where its KMS
  API expects a JSON string, so DescribeKey and GetKeyPolicy on the key fail with a 500. Stored
  here as the JSON text KMS returns.
* A resource whose Condition is false, changed by a stack update (base.yaml's central-bus rules
  when Direct mode's targets went). CloudFormation neither creates nor updates it; moto's update
  path, unlike its create path, ignores the Condition and resolves the resource's properties,
  failing the whole update when they name another resource the condition left out ("Fn::GetAtt
  references undefined resource HubEventBus"). Skipped here, as CloudFormation skips it.
"""

import json

try:
    from moto.cloudformation import parsing as _cfn
    from moto.iam import models as _iam
    from moto.kms import models as _kms
except Exception:  # not the moto server (sitecustomize runs in every interpreter on the path)
    _cfn = None
    _iam = None
    _kms = None


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
