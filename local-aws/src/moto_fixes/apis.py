# Part of moto_fixes (apis): APIs moto 5.2.5 lacks or answers otherwise: Logs Insights query
# definitions, a role named anew replaced, EKS Pod Identity associations.
# moto.rs concatenates mod.py, templates.py, sqs.py, stacks.py and apis.py, in that order, into
# one sitecustomize.py; the names this part uses are mod.py's.
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
