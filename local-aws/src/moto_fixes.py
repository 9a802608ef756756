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
* `!If [condition, value, !Ref AWS::NoValue]` as an element of any list (base.yaml's key policy
  statement for member accounts' direct roles, the queues in the router role's policy).
  CloudFormation drops the element (User Guide, AWS::NoValue: "removes the corresponding
  resource property"; in a list, the element); moto leaves a null in the list, which IAM and KMS
  then refuse or store as written. Dropped here, wherever moto resolves a template.
* AWS::IAM::ManagedPolicy changed by a stack update (tenant.yaml's Karpenter grant when its
  statements or its path change). CloudFormation updates it in place (a new default version of
  the same policy, its attachments as the template lists them), or replaces it when its Path
  changes; moto has no update for it, so the stack loses the resource and the role its grant.
  Updated in place, or replaced, here.
* AWS::KMS::Key with its KeyPolicy as an object (CloudFormation's Json type, the way
  base.yaml and tenant.yaml write it). moto stores the object as the key's policy where its KMS
  API expects a JSON string, so DescribeKey and GetKeyPolicy on the key fail with a 500. Stored
  here as the JSON text KMS returns.
* AWS::Lambda::Function's Tags (base.yaml tags the function with its release). CloudFormation
  tags the function; moto creates it without them, so ListTags answers none. Applied here.
* AWS::Lambda::Function's environment variables given a Number parameter (base.yaml's tuning
  parameters). A Ref to a Number parameter is a string wherever the template uses it
  (CloudFormation User Guide, Parameters: Number); moto passes the number, Lambda stores it, and
  GetFunction answers a JSON number where the API has a string, which the SDKs refuse to parse.
  Passed as the string here.
* A resource whose Condition is false, changed by a stack update (base.yaml's central-bus rules
  when Direct mode's targets went). CloudFormation neither creates nor updates it; moto's update
  path, unlike its create path, ignores the Condition and resolves the resource's properties,
  failing the whole update when they name another resource the condition left out ("Fn::GetAtt
  references undefined resource HubEventBus"). Skipped here, as CloudFormation skips it.
* AWS::Events::Rule changed by a stack update (a new pattern, state or targets, the same Name
  and bus). CloudFormation updates such a rule in place ("No interruption": same physical id,
  the targets the template no longer lists removed); moto deletes it and creates a new one under
  a new generated name, so an upgrade looks as if every rule were replaced and events matched in
  between are lost. Updated in place here; a new Name or bus still replaces, as in AWS.
* A stack's deletion. CloudFormation deletes a resource only once nothing else of the stack
  refers to it (Ref, Fn::GetAtt, Fn::Sub, DependsOn): dependents first. moto deletes in the
  order of a Python set, so tenant.yaml's queue can go before the tenant record that names it,
  and for that moment the router reads "record stands, queue gone" and dead-letters a cluster
  that is leaving on purpose. Deleted here dependents first.
* An SQS message older than its queue's MessageRetentionPeriod. SQS deletes a message left in its
  queue longer than the retention period on its own (SQS API Reference, DeleteMessage), so a
  receive never meets it. moto keeps it, and a ReceiveMessage that meets it marks it received and
  starts its scan again, one expired message a pass: a queue that holds a few hundred of them
  answers an empty receive for its whole wait while a fresh message sits behind them (adopt's
  sentinel read as taken). Deleted here before each receive, as SQS deletes them.
* SQS calls on one queue at the same time. SQS keeps every message it accepted until it is
  deleted or outlives the retention period, and answers a ReceiveMessage with the messages it
  marked received (SQS Developer Guide, "Amazon SQS visibility timeout"). moto's server answers
  each request on a thread of its own, and its SQS takes no lock where it changes a queue's
  messages: a ReceiveMessage that meets a handed-back message copies the set of pending messages
  while another call changes it, fails with a 500 ("Set changed size during iteration") after
  marking the messages before it received, and those stay hidden for the visibility timeout,
  received by nobody (seen here: a storm's spot warning never reached its router); and, by its
  code, a DeleteMessage rebuilds the message list from a copy, so a message a SendMessage appends
  in between is gone. Each queue's calls that read or change its messages take the queue's own
  lock here, one at a time (a long poll still waits without it).
* An SQS queue of another account, and who sent a message. SQS finds a queue by its URL, which
  names the owning account, so a role of one account reaches another account's queue by URL (if
  the queue's policy admits it: EventBridge's cross-account targets send so); and it gives every
  message the sender's id as its SenderId, for a role session `<role id>:<session name>` (SQS API
  reference, ReceiveMessage). moto looks every queue up in the caller's own account, and gives
  every message one fixed SenderId. Looked up by the URL's account, and the caller's id given,
  here. (moto still evaluates no queue policy: the stand-ins that depend on one judge it with
  aws-model.)
* A CommaDelimitedList parameter left at its default (tenant.yaml's EventKinds). CloudFormation
  splits the default as it splits a given value (CloudFormation User Guide, Parameters:
  CommaDelimitedList); moto splits only given values, so `!Join` of a defaulted list fails the
  stack, and DescribeStacks gives any list parameter as a Python list (`['a', 'b']`), which an
  update that keeps its previous value passes back as one item. Split here, and described as
  CloudFormation describes it (`a,b`); a change set that keeps its previous value
  (UsePreviousValue) is handed it already split, which moto's parameter loading cannot split
  again (a 500): joined back here first.
* AWS::SQS::Queue's Tags changed by a stack update (tenant.yaml's kinds tag). CloudFormation
  updates them in place ("Update requires: No interruption", AWS::SQS::Queue Tags); moto's
  update applies only VisibilityTimeout and ReceiveMessageWaitTimeSeconds, so the queue keeps its
  old tags. Applied here (set; no template of the project drops a tag it once set).
* SQS's CloudWatch metrics. SQS reports NumberOfMessagesSent, NumberOfMessagesReceived,
  NumberOfMessagesDeleted and NumberOfEmptyReceives per queue and minute, zero included while the
  queue is active, counting every caller, minutes late; moto reports none. Reported here from the
  server's own SQS calls, each minute a settable delay after it ends (`_sqs_metrics`).
* A StackSet's operations. CloudFormation runs one operation of a stack set at a time, each for
  minutes, refusing another meanwhile (OperationInProgressException) unless managed execution
  queues it; moto finishes each at once. Here each runs for a settable time, and a second is
  refused or queued as CloudFormation would (`_stack_set_operations_take_time`).
* Logs Insights query definitions (AWS::Logs::QueryDefinition, base.yaml's saved queries, and
  the API behind them: PutQueryDefinition, DescribeQueryDefinitions, DeleteQueryDefinition).
  CloudFormation creates a query definition (its Ref the QueryDefinitionId), updates it in place
  and deletes it with the stack (resource type schema: every property updatable, the id
  read-only); moto 5.2.5 has neither the resource type (a stack skips it with a warning) nor the
  API (an unknown action). Kept here per account and region as CloudWatch Logs keeps them: the
  name, query and log groups a put gives (an update replaces all three), listed by name prefix,
  a delete of an unknown id ResourceNotFoundException.

One change is for speed, not for AWS's answers: moto's server lists its own package directory
(a listdir and an isdir per service) on every request to find the service a host names. Under
`make test`, where every request of many emulators competes for two cores, that was a fifth of
an emulator's CPU (py-spy). The list cannot change while the server runs, so it is read once.

Another is for speed too: moto's SQS builds a queue's whole attribute map, with its three
approximate counts (each a pass over every message), to read one setting: once per SendMessage
(ContentBasedDeduplication), and three times per message a ReceiveMessage scans
(MessageRetentionPeriod). A receive from a queue holding n messages was O(n) per message scanned,
and the old queues adopt leaves unread hold hundreds: most of an emulator's CPU in a bench of
sends and receives into one growing queue (py-spy). The counts are now computed only when a
caller asks for them (GetQueueAttributes with `All` or an ApproximateNumberOfMessages name), so
no answer changes.

And one more: to find the method for a request's action, moto lists every function of the
response class (inspect.getmembers) on every request, though a class's methods do not change
while the server runs. Listed once per class here.

Three more, counted under `make test` with py-spy over every emulator (`--gil`, 2026-12-02), none
changing an answer:

* Which of a queue's messages a receive may take. moto reads the clock twice per message a
  receive or a long poll's wake-up scans (visible? delayed?), each read building two datetimes:
  8 % of the emulators' CPU. Read once per scan here, with moto's own clock; a message is
  judged as moto judges it, at one instant instead of two a few microseconds apart.
* The image of an instance RunInstances launches. moto looks it up with DescribeImages' generic
  filter, a pattern match against every image it knows (hundreds of stock AMIs), per instance:
  5 % of the CPU. A filter on one exact image id (no wildcard) is the image of that id, or none:
  looked up by id here.
* A stack's template. moto parses it with PyYAML's pure-Python loader on every CreateStack and
  UpdateStack: 6 % of the CPU. Parsed here by the same loader built on libyaml's parser (PyYAML's
  CLoader, the same constructors and resolver, moto's tag constructor registered on it), falling
  back as moto does; a PyYAML without libyaml keeps moto's loader.

* AWS::IAM::Role whose RoleName or Path a stack update changes (spoke.yaml's forwarding role,
  named since the security review). Both are create-only: CloudFormation makes the new role,
  points what refers to it at the new one, and deletes the old (resource type schema,
  createOnlyProperties); moto updates the role of the new name in place, which does not exist
  ("NoSuchEntity"), and the update fails. Replaced here: the new role made as a create makes it,
  the old one deleted.
* A stack's exports when a change set creates or updates it (make's deploy of a release from its
  URL, tools/deploy_stack.py, and `aws cloudformation deploy` alike). CloudFormation publishes a
  stack's exports however the stack was made, and other stacks import them (tenant.yaml imports
  the base stack's `<RouterName>:QueuePrefix`); moto registers them for CreateStack only, so a
  tenant deployed after a base stack made by a change set fails "No export named …" (and a
  stack a CREATE change set makes imports nothing: moto gives it no other stack's exports), and
  the stack's outputs are those of the template it had before. The executed template's outputs are
  the stack's here, its exports registered and those it no longer exports withdrawn.

* EKS Pod Identity associations (CreatePodIdentityAssociation, ListPodIdentityAssociations,
  DescribePodIdentityAssociation, DeletePodIdentityAssociation). The getting-started guide's
  eksctl gives Karpenter's service account its role this way, and the README's quick path reads
  the role back from it. moto 5.2.5 has no such API (a 404 for any path under the cluster).
  Answered here as the EKS API Reference says: the cluster must exist (ResourceNotFoundException),
  one association per namespace and service account (ResourceInUseException), the role must
  exist (InvalidParameterException); List filters by namespace and service account and answers
  summaries without the role; Describe answers the role.

And the regions each service's backends serve: moto asks botocore for them for every account
backend it creates (each server's first one parsing botocore's endpoint data and the service's
whole model: 3 % of the CPU). They are botocore's data files, which do not change while the
server runs: listed once per service here, and by the zygote (`moto_zygote.py`) before it forks.
"""

import json
import re
import threading
import time

try:
    from moto.awslambda import models as _lambda
    from moto.cloudformation import parsing as _cfn
    from moto.eks import responses as _eks_responses
    from moto.eks import urls as _eks_urls
    from moto.events import models as _events
    from moto.iam import models as _iam
    from moto.kms import models as _kms
    from moto.sqs import models as _sqs
except Exception:  # not the moto server (sitecustomize runs in every interpreter on the path)
    _lambda = None
    _cfn = None
    _eks_responses = None
    _eks_urls = None
    _events = None
    _iam = None
    _kms = None
    _sqs = None


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


def _expired_messages_deleted(backend):
    """Has moto's SQS delete what outlived its queue's retention before a receive scans it."""
    receive = backend.receive_message

    def receive_message(self, queue_name, *args, **kwargs):
        queue = self.get_queue(queue_name)
        retention = int(queue.message_retention_period) * 1000
        now = int(time.time() * 1000)
        with queue._messages_lock:
            expired = [m for m in queue._messages if m.sent_timestamp + retention <= now]
            for message in expired:
                queue._messages.remove(message)
                queue.pending_messages.discard(message)
        return receive(self, queue_name, *args, **kwargs)

    backend.receive_message = receive_message


if _sqs is not None:
    _expired_messages_deleted(_sqs.SQSBackend)


def _queue_calls_one_at_a_time(backend):
    """Has each of moto's SQS calls that read or change a queue's messages hold that queue's lock.

    The lock is the queue's own `_messages_lock` (a Condition over a re-entrant lock), which
    moto's SendMessage already takes to append and a long poll waits on: a waiting receive
    releases it, as Condition.wait does, so a long poll does not hold other callers back.
    """

    def locked(method):
        def call(self, queue_name, *args, **kwargs):
            with self.get_queue(queue_name)._messages_lock:
                return method(self, queue_name, *args, **kwargs)

        return call

    for name in (
        "send_message",
        "receive_message",
        "delete_message",
        "change_message_visibility",
        "purge_queue",
    ):
        setattr(backend, name, locked(getattr(backend, name)))


if _sqs is not None:
    _queue_calls_one_at_a_time(_sqs.SQSBackend)


def _queues_by_url_and_senders_named():
    """Has moto's SQS find a queue in the account its URL names, and name each message's sender."""
    from moto.core.common_models import BaseModel  # noqa: F401 (moto is loaded)
    from moto.iam.models import PARTITION_NAMES, iam_backends
    from moto.sqs import responses
    from moto.sts.models import sts_backends

    caller = threading.local()

    def sender_of(access_key):
        for _, account in list(sts_backends.items()):
            for partition in PARTITION_NAMES:
                try:
                    role = account[partition].get_assumed_role_from_access_key(access_key)
                except KeyError:
                    continue
                if role is not None:
                    return role.user_id
        for _, account in list(iam_backends.items()):
            for partition in PARTITION_NAMES:
                try:
                    backend = account[partition]
                except KeyError:
                    continue
                key = backend.access_keys.get(access_key)
                user = backend.users.get(getattr(key, "user_name", None) or "")
                if user is not None:
                    return user.id
        return _sqs.DEFAULT_SENDER_ID

    def owner_of(url):
        match = re.match(r"^https?://[^/]+/([0-9]{12})/[^/]+$", url or "")
        return match.group(1) if match else None

    def sqs_backend(self):
        try:
            owner = owner_of(self._get_param("QueueUrl"))
        except Exception:
            owner = None
        return _sqs.sqs_backends[owner or self.current_account][self.region]

    responses.SQSResponse.sqs_backend = property(sqs_backend)

    def naming(method):
        def named(self, *args, **kwargs):
            caller.sender = sender_of(self.get_access_key())
            try:
                return method(self, *args, **kwargs)
            finally:
                caller.sender = None

        return named

    responses.SQSResponse.send_message = naming(responses.SQSResponse.send_message)
    responses.SQSResponse.send_message_batch = naming(responses.SQSResponse.send_message_batch)

    message_init = _sqs.Message.__init__

    def init(self, *args, **kwargs):
        message_init(self, *args, **kwargs)
        sender = getattr(caller, "sender", None)
        if sender:
            self.sender_id = sender

    _sqs.Message.__init__ = init


if _sqs is not None:
    _queues_by_url_and_senders_named()


def _list_defaults_split(resource_map):
    """Has moto's CloudFormation split a list parameter's default, as it splits a given value; and
    take a list parameter's previous value (UsePreviousValue, which moto answers with the value
    already split) as the comma-separated string CloudFormation keeps."""
    load = resource_map.load_parameters

    def load_parameters(self):
        for name, value in list(self.input_parameters.items()):
            if isinstance(value, list):
                self.input_parameters[name] = ",".join(value)
        load(self)
        for name, slot in self._template.get("Parameters", {}).items():
            kind = slot.get("Type", "String")
            value = self.resolved_parameters.get(name)
            if (kind == "CommaDelimitedList" or kind.startswith("List<")) and isinstance(value, str):
                self.resolved_parameters[name] = value.split(",")
                self._parsed_resources[name] = self.resolved_parameters[name]

    resource_map.load_parameters = load_parameters


def _list_parameters_described(stack):
    """Has DescribeStacks give a list parameter as CloudFormation does: its values joined by ','."""
    listed = stack.parameter_list.fget

    def parameter_list(self):
        return [
            dict(p, ParameterValue=",".join(map(str, p["ParameterValue"])))
            if isinstance(p["ParameterValue"], list)
            else p
            for p in listed(self)
        ]

    stack.parameter_list = property(parameter_list)


if _cfn is not None:
    _list_defaults_split(_cfn.ResourceMap)
    from moto.cloudformation import models as _cfn_models

    _list_parameters_described(_cfn_models.Stack)


def _queue_tags_updated(model):
    """Has moto's CloudFormation apply a queue's Tags on a stack update, in place."""
    update = model.update_from_cloudformation_json.__func__

    def update_tagged(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        queue = _update_by_name(
            update, cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
        )
        listed = (cloudformation_json.get("Properties") or {}).get("Tags") or []
        queue.tags.update({t["Key"]: str(t["Value"]) for t in listed})
        return queue

    model.update_from_cloudformation_json = classmethod(update_tagged)


if _sqs is not None:
    _queue_tags_updated(_sqs.Queue)


def _moto_modules_listed_once():
    """Reads moto's list of service modules once instead of on every request."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: iter(modules)


if _sqs is not None:
    _moto_modules_listed_once()


def _message_counts_only_when_asked(queue, backend):
    """Counts a queue's messages only for a call that returns the counts."""
    not_asked = threading.local()
    for name in (
        "approximate_number_of_messages",
        "approximate_number_of_messages_delayed",
        "approximate_number_of_messages_not_visible",
    ):

        def count(self, _count=getattr(queue, name).fget):
            # Read inside a call that returns no count: never seen by a caller.
            if getattr(not_asked, "depth", 0):
                return 0
            return _count(self)

        setattr(queue, name, property(count))

    def without_counts(method, asks=lambda *args, **kwargs: False):
        def call(self, *args, **kwargs):
            if asks(*args, **kwargs):
                return method(self, *args, **kwargs)
            not_asked.depth = getattr(not_asked, "depth", 0) + 1
            try:
                return method(self, *args, **kwargs)
            finally:
                not_asked.depth -= 1

        return call

    def asks_counts(queue_name, attribute_names, *args, **kwargs):
        return any(
            name == "All" or name.startswith("ApproximateNumberOfMessages")
            for name in attribute_names or ()
        )

    backend.send_message = without_counts(backend.send_message)
    backend.get_queue_attributes = without_counts(backend.get_queue_attributes, asks_counts)


if _sqs is not None:
    _message_counts_only_when_asked(_sqs.Queue, _sqs.SQSBackend)


def _action_methods_listed_once():
    """Lists a response class's methods once, not on every request that looks an action up."""
    import functools

    from moto.core import responses

    listed = responses.method_names_from_class
    # Only ever asked whether it holds an action's name.
    responses.method_names_from_class = functools.cache(lambda clazz: frozenset(listed(clazz)))


if _sqs is not None:
    _action_methods_listed_once()


def _sqs_metrics(backend):
    """Has SQS report its queues' CloudWatch metrics, as SQS does and moto does not.

    SQS puts NumberOfMessagesSent, NumberOfMessagesReceived, NumberOfMessagesDeleted and
    NumberOfEmptyReceives in the AWS/SQS namespace (dimension QueueName) at one-minute intervals,
    with "a non-negative value reported if the queue is active" (zero included; a queue is active
    for up to six hours after any API call on it), and counts every caller: a delete with a valid
    receipt handle is counted even when the message was already deleted (SQS Developer Guide,
    "Available CloudWatch metrics for Amazon SQS"). The datapoints arrive late: each minute is
    published here `metric_delay_seconds` after it ends (150 by default; POST /moto-api/config
    with {"sqs": {"metric_delay_seconds": n}} sets it for the server).
    """
    from datetime import datetime, timezone

    from moto.cloudwatch.models import MetricDatum
    from moto.core.common_models import CloudWatchMetricProvider
    from moto.moto_api._internal import models as api

    names = ("NumberOfMessagesSent", "NumberOfMessagesReceived", "NumberOfMessagesDeleted",
             "NumberOfEmptyReceives")
    active_for = 6 * 3600
    settings = {"metric_delay_seconds": 150}
    lock = threading.Lock()
    # (account, region, queue) -> {"minutes": {minute: [four counts]}, "first": minute,
    # "last": seconds of the last call, "published": {minute: [datums]}}
    queues = {}

    def minute_of(seconds):
        return int(seconds) // 60 * 60

    def record(self, queue_name, index=None, n=1):
        now = time.time()
        key = (self.account_id, self.region_name, queue_name)
        with lock:
            seen = queues.setdefault(
                key, {"minutes": {}, "first": minute_of(now), "last": now, "published": {}})
            seen["last"] = now
            if index is not None:
                counts = seen["minutes"].setdefault(minute_of(now), [0, 0, 0, 0])
                counts[index] += n

    def counted(method, index):
        def call(self, queue_name, *args, **kwargs):
            result = method(self, queue_name, *args, **kwargs)
            record(self, queue_name, index)
            return result

        return call

    backend.send_message = counted(backend.send_message, 0)
    receive = backend.receive_message

    def receive_message(self, queue_name, *args, **kwargs):
        result = receive(self, queue_name, *args, **kwargs)
        if result:
            record(self, queue_name, 1, len(result))
        else:
            record(self, queue_name, 3)
        return result

    backend.receive_message = receive_message
    backend.delete_message = counted(backend.delete_message, 2)
    create = backend.create_queue

    def create_queue(self, name, *args, **kwargs):
        queue = create(self, name, *args, **kwargs)
        record(self, name)
        return queue

    backend.create_queue = create_queue
    delete_queue = backend.delete_queue

    def delete_queue_metrics(self, queue_name, *args, **kwargs):
        delete_queue(self, queue_name, *args, **kwargs)
        with lock:
            queues.pop((self.account_id, self.region_name, queue_name), None)

    backend.delete_queue = delete_queue_metrics

    class SqsMetrics(CloudWatchMetricProvider):
        @staticmethod
        def get_cloudwatch_metrics(account_id, region):
            now = time.time()
            due = minute_of(now - settings["metric_delay_seconds"]) - 60
            datums = []
            with lock:
                for (account, where, queue), seen in queues.items():
                    if (account, where) != (account_id, region):
                        continue
                    minute = seen["first"]
                    last = min(due, minute_of(seen["last"] + active_for))
                    while minute <= last:
                        if minute not in seen["published"]:
                            counts = seen["minutes"].pop(minute, [0, 0, 0, 0])
                            at = datetime.fromtimestamp(minute, timezone.utc).replace(tzinfo=None)
                            seen["published"][minute] = [
                                MetricDatum("AWS/SQS", name, float(count),
                                            [{"Name": "QueueName", "Value": queue}], at, "Count")
                                for name, count in zip(names, counts)
                            ]
                        datums.extend(seen["published"][minute])
                        minute += 60
            return datums

    get_config = api.MotoAPIBackend.get_config
    set_config = api.MotoAPIBackend.set_config
    reset = api.MotoAPIBackend.reset

    def get_sqs_config(self):
        return dict(get_config(self), sqs=dict(settings))

    def set_sqs_config(self, config):
        set_config(self, config)
        if "metric_delay_seconds" in config.get("sqs", {}):
            settings["metric_delay_seconds"] = max(0, int(config["sqs"]["metric_delay_seconds"]))

    def reset_metrics(self, *args, **kwargs):
        with lock:
            queues.clear()
        return reset(self, *args, **kwargs)

    api.MotoAPIBackend.get_config = get_sqs_config
    api.MotoAPIBackend.set_config = set_sqs_config
    api.MotoAPIBackend.reset = reset_metrics
    return SqsMetrics


if _sqs is not None:
    # Held here: CloudWatch finds its providers by __subclasses__(), which keeps only weak
    # references, and would lose a class nothing else holds.
    _SQS_METRICS = _sqs_metrics(_sqs.SQSBackend)


def _stack_set_operations_take_time():
    """Has a StackSet run one operation at a time, each taking time, as CloudFormation does.

    StackSets "performs only one operation at a time" per stack set: an operation requested while
    another runs is refused with OperationInProgressException, unless the stack set's managed
    execution is active, in which case conflicting operations are queued (QUEUED) and run in
    order (CloudFormation User Guide, "StackSets concepts", managed execution; API reference,
    CreateStackInstances). moto finishes every operation at once (SUCCEEDED) and ignores
    ManagedExecution. Here each operation is RUNNING for `stack_set_operation_seconds` (3 unless
    POST /moto-api/config {"cloudformation": {"stack_set_operation_seconds": n}}), then SUCCEEDED;
    DescribeStackSet and DescribeStackSetOperation answer the state of the moment.
    """
    from moto.cloudformation import models as cfn_models
    from moto.cloudformation import responses as cfn_responses
    from moto.cloudformation.exceptions import CloudFormationError
    from moto.moto_api._internal import models as api

    class OperationInProgress(CloudFormationError):
        code = "OperationInProgressException"

    settings = {"stack_set_operation_seconds": 3}
    stack_set = cfn_models.FakeStackSet if hasattr(cfn_models, "FakeStackSet") else cfn_models.StackSet
    create_operation = stack_set._create_operation

    def timed(self):
        """Each operation's (start, end), in the order requested."""
        if not hasattr(self, "_timed"):
            self._timed = {}
        return self._timed

    def settle(self):
        now = time.time()
        for operation in self.operations:
            start, end = timed(self).get(operation["OperationId"], (0, 0))
            if operation["Status"] in ("RUNNING", "QUEUED"):
                operation["Status"] = "QUEUED" if now < start else "RUNNING" if now < end else "SUCCEEDED"

    def _create_operation(self, operation_id, action, status, accounts=None, regions=None):
        settle(self)
        busy = [o for o in self.operations if o["Status"] in ("RUNNING", "QUEUED")]
        now = time.time()
        if busy and not getattr(self, "_managed", False):
            raise OperationInProgress(
                f"Another Operation on StackSet {self.id} is in progress: "
                f"{busy[-1]['OperationId']}")
        start = max([now] + [timed(self)[o["OperationId"]][1] for o in busy])
        end = start + settings["stack_set_operation_seconds"]
        operation = create_operation(self, operation_id, action, status, accounts, regions)
        if status == "SUCCEEDED":
            operation["Status"] = "QUEUED" if busy else "RUNNING"
            timed(self)[operation_id] = (start, end)
        return operation

    stack_set._create_operation = _create_operation
    stack_set.managed_execution = property(lambda self: {"Active": getattr(self, "_managed", False)})

    describe = cfn_models.CloudFormationBackend.describe_stack_set_operation

    def describe_stack_set_operation(self, stackset_name, operation_id):
        stackset, operation = describe(self, stackset_name, operation_id)
        settle(stackset)
        return stackset, operation

    cfn_models.CloudFormationBackend.describe_stack_set_operation = describe_stack_set_operation
    listed = cfn_models.CloudFormationBackend.list_stack_set_operations

    def list_stack_set_operations(self, stackset_name):
        operations = listed(self, stackset_name)
        settle(self.describe_stack_set(stackset_name))
        return operations

    cfn_models.CloudFormationBackend.list_stack_set_operations = list_stack_set_operations
    create = cfn_responses.CloudFormationResponse.create_stack_set

    def create_stack_set(self):
        result = create(self)
        active = self._get_param("ManagedExecution.Active")
        if active is None:
            active = (self._get_params().get("ManagedExecution") or {}).get("Active")
        if str(active).lower() == "true":
            self.cloudformation_backend.describe_stack_set(self._get_param("StackSetName"))._managed = True
        return result

    cfn_responses.CloudFormationResponse.create_stack_set = create_stack_set

    get_config = api.MotoAPIBackend.get_config
    set_config = api.MotoAPIBackend.set_config

    def get_cfn_config(self):
        return dict(get_config(self), cloudformation=dict(settings))

    def set_cfn_config(self, config):
        set_config(self, config)
        seconds = config.get("cloudformation", {}).get("stack_set_operation_seconds")
        if seconds is not None:
            settings["stack_set_operation_seconds"] = max(0, int(seconds))

    api.MotoAPIBackend.get_config = get_cfn_config
    api.MotoAPIBackend.set_config = set_cfn_config


if _cfn is not None:
    _stack_set_operations_take_time()


def _visible_messages_at_one_instant(queue):
    """Reads the clock once per scan of a queue's messages, not twice per message."""
    from moto.core.utils import unix_time_millis

    def messages(self):
        now = unix_time_millis()
        # Message.visible and Message.delayed, at one instant.
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    queue.messages = property(messages)


if _sqs is not None:
    _visible_messages_at_one_instant(_sqs.Queue)


def _image_looked_up_by_id():
    """Answers DescribeImages filtered on one exact image id (RunInstances' lookup) by that id."""
    from moto.ec2.models.amis import AmiBackend

    describe = AmiBackend.describe_images

    def describe_images(self, ami_ids=None, filters=None, exec_users=None, owners=None):
        wanted = (filters or {}).get("image-id")
        if (
            isinstance(wanted, str)
            and len(filters) == 1
            and not ami_ids
            and not exec_users
            and not owners
            and not any(c in wanted for c in "*?[")
        ):
            image = self.amis.get(wanted)
            return [image] if image is not None else []
        return describe(self, ami_ids, filters, exec_users, owners)

    AmiBackend.describe_images = describe_images


if _cfn is not None:
    _image_looked_up_by_id()


def _templates_parsed_by_libyaml():
    """Parses stack templates with libyaml's parser under moto's constructors, when PyYAML has it."""
    import yaml
    from moto.cloudformation import models, utils
    from yaml.parser import ParserError
    from yaml.scanner import ScannerError

    if not getattr(yaml, "__with_libyaml__", False):
        return

    class Loader(yaml.CLoader):
        """yaml.Loader's constructor and resolver over libyaml's parser (PyYAML's CLoader)."""

    Loader.add_multi_constructor("", utils.yaml_tag_constructor)

    def parse_template(template):
        try:
            return yaml.load(template, Loader=Loader)
        except (ParserError, ScannerError):
            return json.loads(template)

    models.Stack.parse_template = staticmethod(parse_template)


if _cfn is not None:
    _templates_parsed_by_libyaml()


def _regions_listed_once():
    """Lists the regions of each service once per process (botocore's data files do not change)."""
    from moto.core.base_backend import AccountSpecificBackend

    generate = AccountSpecificBackend._generate_regions
    listed = {}
    lock = threading.Lock()

    def _generate_regions(self, service_name):
        with lock:
            if service_name not in listed:
                listed[service_name] = tuple(generate(self, service_name))
            return list(listed[service_name])

    AccountSpecificBackend._generate_regions = _generate_regions


if _sqs is not None:
    _regions_listed_once()


def _change_set_exports_registered():
    """Has moto publish a stack's exports when a change set creates or updates it."""
    from moto.cloudformation import models

    execute = models.CloudFormationBackend.execute_change_set

    def execute_change_set(self, change_set_name, stack_name=None):
        change_set = self.change_sets.get(change_set_name) or next(
            (c for c in self.change_sets.values() if c.change_set_name == change_set_name), None)
        stack = self.stacks.get(change_set.stack_id) if change_set is not None else None
        if stack is not None:
            # A stack a CREATE change set made knows no other stack's exports in moto: its
            # imports would find none.
            stack.cross_stack_resources = self.exports
            stack.resource_map.cross_stack_resources = self.exports
        execute(self, change_set_name, stack_name)
        if stack is None:
            return
        # The outputs of the template just executed (moto keeps those of the stack it made when
        # the change set was created, before any resource existed).
        stack._parse_template()
        stack.output_map = stack._create_output_map()
        exported = {e.name for e in stack.exports}
        for name, export in list(self.exports.items()):
            if export.exporting_stack_id == stack.stack_id and name not in exported:
                del self.exports[name]
        for export in stack.exports:
            self.exports[export.name] = export

    models.CloudFormationBackend.execute_change_set = execute_change_set


if _cfn is not None:
    _change_set_exports_registered()


def _query_definitions():
    """Gives moto's CloudWatch Logs query definitions, and its CloudFormation their resource type."""
    import uuid

    from moto.core.common_models import CloudFormationModel
    from moto.core.utils import unix_time_millis, utcnow
    from moto.logs import exceptions, models, responses

    lock = threading.Lock()

    def kept(backend):
        if not hasattr(backend, "query_definitions"):
            backend.query_definitions = {}
        return backend.query_definitions

    def put(backend, name, query, log_groups, definition_id=None):
        with lock:
            known = kept(backend)
            if definition_id is not None and definition_id not in known:
                raise exceptions.ResourceNotFoundException("Query definition not found")
            definition_id = definition_id or str(uuid.uuid4())
            known[definition_id] = {
                "queryDefinitionId": definition_id,
                "name": name,
                "queryString": query,
                "logGroupNames": list(log_groups or []),
                "lastModified": int(unix_time_millis(utcnow())),
            }
        return definition_id

    def delete(backend, definition_id):
        with lock:
            if kept(backend).pop(definition_id, None) is None:
                raise exceptions.ResourceNotFoundException("Query definition not found")

    def put_query_definition(self):
        definition_id = put(
            self.logs_backend,
            self._get_param("name"),
            self._get_param("queryString"),
            self._get_param("logGroupNames"),
            self._get_param("queryDefinitionId"),
        )
        return json.dumps({"queryDefinitionId": definition_id})

    def describe_query_definitions(self):
        prefix = self._get_param("queryDefinitionNamePrefix") or ""
        with lock:
            found = [d for d in kept(self.logs_backend).values() if d["name"].startswith(prefix)]
        return json.dumps({"queryDefinitions": sorted(found, key=lambda d: d["name"])})

    def delete_query_definition(self):
        delete(self.logs_backend, self._get_param("queryDefinitionId"))
        return json.dumps({"success": True})

    responses.LogsResponse.put_query_definition = put_query_definition
    responses.LogsResponse.describe_query_definitions = describe_query_definitions
    responses.LogsResponse.delete_query_definition = delete_query_definition

    class QueryDefinition(CloudFormationModel):
        # moto's model metaclass names the service by the module ("moto.<service>.…").
        __module__ = models.__name__

        def __init__(self, definition_id):
            self.definition_id = definition_id

        @property
        def physical_resource_id(self):
            return self.definition_id

        @staticmethod
        def cloudformation_name_type():
            return None

        @staticmethod
        def cloudformation_type():
            return "AWS::Logs::QueryDefinition"

        @classmethod
        def has_cfn_attr(cls, attr):
            return attr == "QueryDefinitionId"

        def get_cfn_attribute(self, attribute_name):
            return self.definition_id

        @staticmethod
        def _put(properties, account_id, region_name, definition_id=None):
            backend = models.logs_backends[account_id][region_name]
            return put(
                backend,
                properties.get("Name"),
                properties.get("QueryString"),
                properties.get("LogGroupNames"),
                definition_id,
            )

        @classmethod
        def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
            properties = cloudformation_json.get("Properties") or {}
            return cls(cls._put(properties, account_id, region_name))

        @classmethod
        def update_from_cloudformation_json(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
            properties = cloudformation_json.get("Properties") or {}
            cls._put(properties, account_id, region_name, original_resource.definition_id)
            return original_resource

        @classmethod
        def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name):
            try:
                delete(models.logs_backends[account_id][region_name], resource_name)
            except exceptions.ResourceNotFoundException:
                pass

    # moto lists CloudFormationModel's subclasses once, and caches what it found.
    for cached in (_cfn.get_model_list, _cfn.get_model_map, _cfn.get_name_type_map):
        cached.cache_clear()


if _cfn is not None:
    _query_definitions()


def _role_replaced_when_named_anew(model):
    """Has moto's CloudFormation replace a role whose RoleName or Path an update changes."""
    update = model.update_from_cloudformation_json.__func__

    def update_or_replace(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        properties = cloudformation_json.get("Properties") or {}
        name = properties.get("RoleName", original_resource.name)
        path = properties.get("Path", "/")
        if name == original_resource.name and path == original_resource.path:
            return _update_by_name(
                update, cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
            )
        replacement = cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )
        backend = _iam.iam_backends[account_id][_iam.get_partition(region_name)]
        for policy_name in list(original_resource.policies):
            backend.delete_role_policy(original_resource.name, policy_name)
        backend.delete_role(original_resource.name)
        return replacement

    model.update_from_cloudformation_json = classmethod(update_or_replace)


if _iam is not None:
    _role_replaced_when_named_anew(_iam.Role)


def _pod_identity_associations(responses, urls):
    """Gives moto's EKS the Pod Identity association API (see the module's docs)."""
    import uuid
    from datetime import datetime, timezone

    from moto.core.responses import ActionResult
    from moto.eks import exceptions as errors
    from moto.eks.models import eks_backends

    # (account, region, cluster) -> association id -> association.
    associations = {}
    lock = threading.Lock()

    def not_found(message):
        return errors.ResourceNotFoundException(
            clusterName=None, nodegroupName=None, fargateProfileName=None, addonName=None, message=message
        )

    def of_cluster(self):
        # moto's EKS names the URI's {name} as the URI does, not as the member (clusterName).
        name = self._get_param("name")
        if name not in eks_backends[self.current_account][self.region].clusters:
            raise not_found(f"No cluster found for name: {name}.")
        return name, associations.setdefault((self.current_account, self.region, name), {})

    def summary(association):
        keys = ("clusterName", "namespace", "serviceAccount", "associationArn", "associationId", "ownerArn")
        return {k: association[k] for k in keys if k in association}

    def create_pod_identity_association(self):
        name, known = of_cluster(self)
        namespace = self._get_param("namespace")
        account = self._get_param("serviceAccount")
        role_arn = self._get_param("roleArn")
        role_name = role_arn.rsplit("/", 1)[-1]
        iam = _iam.iam_backends[self.current_account][_iam.get_partition(self.region)]
        if not any(r.name == role_name and r.arn == role_arn for r in iam.roles.values()):
            raise errors.InvalidParameterException(
                clusterName=name, nodegroupName=None, fargateProfileName=None, addonName=None,
                message=f"Role {role_arn} does not exist",
            )
        with lock:
            if any(a["namespace"] == namespace and a["serviceAccount"] == account for a in known.values()):
                raise errors.ResourceInUseException(
                    clusterName=name, nodegroupName=None, fargateProfileName=None, addonName=None,
                    message="Association already exists",
                )
            association_id = "a-" + uuid.uuid4().hex[:17]
            now = datetime.now(timezone.utc).timestamp()
            association = {
                "clusterName": name,
                "namespace": namespace,
                "serviceAccount": account,
                "roleArn": role_arn,
                "associationArn": f"arn:{_iam.get_partition(self.region)}:eks:{self.region}:"
                f"{self.current_account}:podidentityassociation/{name}/{association_id}",
                "associationId": association_id,
                "tags": self._get_param("tags") or {},
                "createdAt": now,
                "modifiedAt": now,
                "disableSessionTags": bool(self._get_param("disableSessionTags")),
            }
            known[association_id] = association
        return ActionResult({"association": association})

    def list_pod_identity_associations(self):
        _, known = of_cluster(self)
        namespace = self._get_param("namespace")
        account = self._get_param("serviceAccount")
        found = [
            summary(a)
            for a in known.values()
            if namespace in (None, a["namespace"]) and account in (None, a["serviceAccount"])
        ]
        return ActionResult({"associations": found})

    def described(self, delete):
        name, known = of_cluster(self)
        association_id = self._get_param("associationId")
        with lock:
            association = known.pop(association_id, None) if delete else known.get(association_id)
        if association is None:
            raise not_found(f"No Pod Identity Association found for id: {association_id} in cluster {name}")
        return ActionResult({"association": association})

    responses.EKSResponse.create_pod_identity_association = create_pod_identity_association
    responses.EKSResponse.list_pod_identity_associations = list_pod_identity_associations
    responses.EKSResponse.describe_pod_identity_association = lambda self: described(self, False)
    responses.EKSResponse.delete_pod_identity_association = lambda self: described(self, True)
    dispatch = urls.response.dispatch
    urls.url_paths["{0}/clusters/(?P<name>[^/]+)/pod-identity-associations$"] = dispatch
    urls.url_paths["{0}/clusters/(?P<name>[^/]+)/pod-identity-associations/(?P<associationId>[^/]+)$"] = dispatch


if _eks_responses is not None and _iam is not None:
    _pod_identity_associations(_eks_responses, _eks_urls)
