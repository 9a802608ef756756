# Part of moto_fixes (sqs): SQS as AWS runs it: retention, one call at a time per queue, queues by
# URL and senders, tags, counts only when asked, and its CloudWatch metrics per minute, late.
# moto.rs concatenates mod.py, templates.py, sqs.py, stacks.py and apis.py, in that order, into
# one sitecustomize.py; the names this part uses are mod.py's.
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

