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
* DescribeStackResources by PhysicalResourceId (verify finds the tenant stack that made a queue,
  and its alarm, this way). CloudFormation answers the resources of the stack that contains the
  resource, or ValidationError "Stack for <id> does not exist" (API reference,
  DescribeStackResources); moto reads StackName alone, so every such call failed as for a stack
  named None. Looked up here, a queue's URL compared by its path (moto's stacks name a queue by
  AWS's host, its GetQueueUrl by the server's).

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

