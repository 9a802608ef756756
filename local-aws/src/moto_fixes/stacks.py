# Part of moto_fixes (stacks): Stack sets that take time, one visible instant per receive, images
# and templates read fast, regions listed once, change sets' exports, a resource's stack found by
# its physical id.
# moto.rs concatenates mod.py, templates.py, sqs.py, stacks.py and apis.py, in that order, into
# one sitecustomize.py; the names this part uses are mod.py's.
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



def _stack_resources_by_physical_id():
    """Has DescribeStackResources find the stack that made a resource, by its physical id.

    DescribeStackResources takes StackName or PhysicalResourceId; given the latter, CloudFormation
    answers the resources of the stack that contains that resource, and ValidationError "Stack for
    <id> does not exist" for a resource no stack made (API reference, DescribeStackResources).
    moto reads StackName alone, so every such call failed as if for a stack named None. A queue's
    physical id is its URL, which moto's stacks spell with AWS's host (https://sqs.<region>.
    amazonaws.com/<account>/<name>) and its GetQueueUrl with the server's own: URLs compare by
    their path.
    """
    from urllib.parse import urlparse

    from moto.cloudformation import responses as cfn_responses
    from moto.cloudformation.exceptions import ValidationError

    describe = cfn_responses.CloudFormationResponse.describe_stack_resources

    def same(physical, asked):
        if physical == asked:
            return True
        a, b = urlparse(physical), urlparse(asked)
        return bool(a.scheme and b.scheme and a.path and a.path == b.path)

    def describe_stack_resources(self):
        asked = self._get_param("PhysicalResourceId")
        if asked is None or self._get_param("StackName"):
            return describe(self)
        for stack in self.cloudformation_backend.stacks.values():
            resources = list(stack.stack_resources)
            if any(same(getattr(r, "physical_resource_id", None) or "", asked) for r in resources):
                return cfn_responses.ActionResult({
                    "StackResources": [cfn_responses.StackResourceDTO(stack, r) for r in resources]
                })
        raise ValidationError(message=f"Stack for {asked} does not exist")

    cfn_responses.CloudFormationResponse.describe_stack_resources = describe_stack_resources


if _cfn is not None:
    _stack_resources_by_physical_id()
