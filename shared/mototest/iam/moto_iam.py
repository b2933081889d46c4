"""moto_server whose IAM enforcement evaluates resources and conditions.

moto 5.2 enforces IAM when INITIAL_NO_AUTH_ACTION_COUNT (or POST /moto-api/reset-auth)
says so, but it evaluates a policy's Action only: every EC2, SSM, Secrets Manager, EKS
and EventBridge request is checked against the resource "*" (so a statement naming
instance ARNs never matches), Condition blocks are ignored, resource policies are not
read, and an unsigned AssumeRoleWithWebIdentity crashes the request. A least-privilege
role is then refused everything it is granted.

This launcher runs moto_server unchanged except for that decision, for callers that
are assumed roles (the credentials a Lambda function or an IRSA pod gets):

  * each request is mapped to the authorization checks AWS documents for it: action,
    resource ARN and condition keys (aws:RequestTag/*, aws:TagKeys, aws:ResourceTag/*
    read from moto's state, ec2:CreateAction, iam:PassedToService, events:source,
    events:detail-type, aws:PrincipalArn), one check per resource the call touches
    (CreateFleet: the fleet, instance, volume, network interface, spot request, launch
    template, subnets, security groups, image; the instance profile's role as
    iam:PassRole);
  * each check is evaluated by @cloud-copilot/iam-simulate (evaluate.cjs) against the
    role's identity policies as moto stores them and, for EventBridge, the bus's
    resource policy; anything but Allowed refuses the request with the service's
    error (EC2 UnauthorizedOperation, AccessDeniedException, AccessDenied);
  * a request this file has no mapping for is refused (fail closed), naming the
    action, so a new call cannot pass unchecked;
  * an unsigned AssumeRoleWithWebIdentity is checked as AWS does: the token's issuer
    must be an OIDC provider registered in moto with the token's audience, and the
    role's trust policy must allow the provider with the token's sub and aud (its
    conditions on the provider's keys are evaluated here: iam-simulate ignores
    condition keys it does not know, which would let any sub through). The
    token's signature is not verified (moto has no key discovery).

IAM users (the test harness's administrator) keep moto's own evaluation. A presigned
sts:GetCallerIdentity, which is what an EKS bearer token is, is authenticated as STS
does it (see "Presigned GetCallerIdentity"). Six moto gaps outside IAM are bridged
too: an EKS cluster's endpoint and CA (see "EKS clusters"), a rule's Lambda target
(see "EventBridge targets"), AWS's public parameters moto does not ship (see "Public
parameters"), CreateFleet's instances lacking their launch template's instance
profile (see "CreateFleet's instance profile"), TestEventPattern, which moto leaves
empty (see "TestEventPattern"), and a stack deletion that AWS stops at a role an
instance profile still holds (see "CloudFormation's role deletion").

Every decision is appended to $MOTO_IAM_LOG (JSON lines) when set: the tests read it to
show which calls the deployed roles made and why a refused call was refused.

Usage: python3 moto_iam.py [moto_server arguments]   (JOINER_NODE_MODULES and a node
binary, $JOINER_NODE or `node` on PATH, are needed for the evaluator.)
"""

import base64
import fnmatch
import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import threading
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

from moto import server, settings
from moto.core import authorization
from moto.core.exceptions import JsonRESTError, _RESTError
from moto.core.responses import ActionResult
from moto.cloudformation import models as cfn_models
from moto.core.utils import iso_8601_datetime_without_milliseconds, utcfromtimestamp
from moto.ec2.models import ec2_backends
from moto.ec2.models.fleets import FleetsBackend
from moto.eks.models import EKSBackend
from moto.events import models as events_models
from moto.events.models import events_backends
from moto.events.responses import EventsHandler
from moto.iam import access_control
from moto.iam import models as iam_models
from moto.iam.exceptions import DeleteConflictException
from moto.iam.models import iam_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.secretsmanager.models import secretsmanager_backends
from moto.ssm import models as ssm_models
from moto.sts.models import sts_backends
from moto.sts.responses import TokenResponse

PARTITION = "aws"
# Stands for the ID of a resource the request creates (AWS authorizes creation
# against the new resource's ARN).
NEW = "new"


class Refused(Exception):
    """A check that did not come out Allowed."""

    def __init__(self, check: dict[str, Any], result: str, detail: str = ""):
        super().__init__(f"{check['action']} on {check['resource']}: {result} {detail}".strip())
        self.check, self.result, self.detail = check, result, detail


class Unmapped(Exception):
    """A request this file does not know the authorization checks of."""


# --- the evaluator process -------------------------------------------------------------

_eval_lock = threading.Lock()
_eval_proc: subprocess.Popen | None = None
_eval_seq = 0


def _evaluator() -> subprocess.Popen:
    global _eval_proc
    if _eval_proc is None or _eval_proc.poll() is not None:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "evaluate.cjs")
        node = os.environ.get("JOINER_NODE") or "node"
        _eval_proc = subprocess.Popen(
            [node, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
    return _eval_proc


def evaluate(request: dict[str, Any]) -> tuple[str, str]:
    global _eval_seq
    with _eval_lock:
        _eval_seq += 1
        request = dict(request, id=_eval_seq)
        proc = _evaluator()
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
    if not line:
        return "Error", "the evaluator (evaluate.cjs) exited"
    answer = json.loads(line)
    return answer.get("result", "Error"), answer.get("detail", "")


_log_lock = threading.Lock()


def log(entry: dict[str, Any]) -> None:
    path = os.environ.get("MOTO_IAM_LOG")
    if not path:
        return
    with _log_lock, open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")


# --- request parameters ----------------------------------------------------------------


def flat(data: dict[str, Any]) -> dict[str, str]:
    """A query-protocol request's parameters, one value each."""
    out = {}
    for k, v in data.items():
        out[k] = v[0] if isinstance(v, list) and v else v
    return out


def members(q: dict[str, str], prefix: str) -> list[dict[str, str]]:
    """The numbered members prefix.N.* of a query request, in order, each as its
    sub-keys (prefix.N.Key -> Key; prefix.N -> "")."""
    groups: dict[int, dict[str, str]] = defaultdict(dict)
    p = prefix + "."
    for k, v in q.items():
        if not k.startswith(p):
            continue
        n, _, rest = k[len(p):].partition(".")
        if n.isdigit():
            groups[int(n)][rest] = v
    return [groups[n] for n in sorted(groups)]


def values(q: dict[str, str], prefix: str) -> list[str]:
    return [m[""] for m in members(q, prefix) if "" in m]


def query_tags(m: dict[str, str], prefix: str) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in members(m, prefix) if "Key" in t}


def tag_specs(q: dict[str, str], prefix: str = "TagSpecification") -> dict[str, dict[str, str]]:
    """TagSpecification.N.{ResourceType,Tag.M.Key,Tag.M.Value} by resource type."""
    out: dict[str, dict[str, str]] = {}
    for spec in members(q, prefix):
        out.setdefault(spec.get("ResourceType", ""), {}).update(query_tags(spec, "Tag"))
    return out


def request_tags(tags: dict[str, str] | None) -> dict[str, Any]:
    if not tags:
        return {}
    ctx: dict[str, Any] = {"aws:RequestTag/" + k: v for k, v in tags.items()}
    ctx["aws:TagKeys"] = sorted(tags)
    return ctx


def resource_tags(tags: dict[str, str] | None) -> dict[str, Any]:
    return {"aws:ResourceTag/" + k: v for k, v in (tags or {}).items()}


# --- mapping requests to checks --------------------------------------------------------


class Request:
    def __init__(self, iam_request: Any, principal_arn: str, role_arn: str):
        self.r = iam_request
        self.account = iam_request.account_id
        self.region = iam_request._region
        self.service, _, self.name = iam_request._action.partition(":")
        self.principal_arn = principal_arn
        self.role_arn = role_arn
        self.checks: list[dict[str, Any]] = []

    def query(self) -> dict[str, str]:
        return flat(self.r._data)

    def json(self) -> dict[str, Any]:
        body = self.r._body
        if isinstance(body, bytes):
            body = body.decode("utf-8")
        return json.loads(body or "{}")

    def arn(self, service: str, resource: str, account: str | None = None) -> str:
        acct = self.account if account is None else account
        region = "" if service == "iam" else self.region
        return f"arn:{PARTITION}:{service}:{region}:{acct}:{resource}"

    def check(self, action: str, resource: str, context: dict[str, Any] | None = None,
              resource_policy: dict[str, Any] | None = None) -> None:
        ctx = {"aws:PrincipalArn": self.role_arn, "aws:PrincipalAccount": self.account}
        ctx.update(context or {})
        self.checks.append({"action": action, "resource": resource, "context": ctx,
                            "resourcePolicy": resource_policy})


def ec2_backend(req: Request) -> Any:
    return ec2_backends[req.account][req.region]


EC2_PREFIXES = {
    "i-": "instance", "vol-": "volume", "lt-": "launch-template", "eni-": "network-interface",
    "sir-": "spot-instances-request", "fleet-": "fleet", "ami-": "image", "sg-": "security-group",
    "subnet-": "subnet", "snap-": "snapshot", "vpc-": "vpc",
}


def ec2_arn(req: Request, resource_id: str) -> str:
    for prefix, kind in EC2_PREFIXES.items():
        if resource_id.startswith(prefix):
            if kind in ("image", "snapshot"):
                return req.arn("ec2", f"{kind}/{resource_id}", account="")
            return req.arn("ec2", f"{kind}/{resource_id}")
    raise Unmapped(f"EC2 resource ID {resource_id!r} of an unknown type")


def ec2_tags(req: Request, resource_id: str) -> dict[str, str]:
    return dict(ec2_backend(req).tags.get(resource_id, {}))


def launch_template(req: Request, spec: dict[str, str], prefix: str = "") -> Any:
    be = ec2_backend(req)
    if spec.get(prefix + "LaunchTemplateId"):
        return be.get_launch_template(spec[prefix + "LaunchTemplateId"])
    if spec.get(prefix + "LaunchTemplateName"):
        return be.get_launch_template_by_name(spec[prefix + "LaunchTemplateName"])
    return None


def template_version(lt: Any, version: str | None) -> dict[str, Any]:
    if version in (None, "", "$Default"):
        return lt.default_version().data
    if version == "$Latest":
        return lt.latest_version().data
    return lt.get_version(int(version)).data


def lt_tag_specs(data: dict[str, Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    specs = data.get("TagSpecifications") or data.get("TagSpecification") or []
    for spec in specs:
        tags = spec.get("Tags") or spec.get("Tag") or []
        out.setdefault(spec.get("ResourceType", ""), {}).update(
            {t["Key"]: t.get("Value", "") for t in tags})
    return out


def lt_security_groups(data: dict[str, Any]) -> list[str]:
    groups = list(data.get("SecurityGroupIds") or data.get("SecurityGroupId") or [])
    for ni in data.get("NetworkInterfaces") or data.get("NetworkInterface") or []:
        groups += list(ni.get("Groups") or ni.get("SecurityGroupId") or [])
    return groups


def profile_roles(req: Request, profile: dict[str, Any] | None) -> list[str]:
    """The role ARNs of an instance profile named in a launch request."""
    if not profile:
        return []
    iam = iam_backends[req.account][PARTITION]
    if profile.get("Arn"):
        ip = iam.get_instance_profile_by_arn(profile["Arn"])
    elif profile.get("Name"):
        ip = iam.get_instance_profile(profile["Name"])
    else:
        return []
    return [r.arn for r in ip.roles]


def launch_checks(req: Request, create_action: str, own: dict[str, dict[str, str]],
                  templates: list[tuple[Any, dict[str, Any]]], subnets: list[str], images: list[str],
                  groups: list[str], spot: bool, profile: dict[str, Any] | None) -> None:
    """The checks of RunInstances or CreateFleet: the resources created (with the tags
    the request and its launch templates put on them), those referenced, and the
    instance profile's role passed to EC2."""
    created = {k: dict() for k in ("instance", "volume", "network-interface")}
    if spot:
        created["spot-instances-request"] = {}
    if create_action == "CreateFleet":
        created["fleet"] = {}
    for _, data in templates:
        for kind, tags in lt_tag_specs(data).items():
            if kind in created:
                created[kind].update(tags)
    for kind, tags in own.items():
        if kind in created:
            created[kind].update(tags)
    for kind, tags in sorted(created.items()):
        action = "ec2:CreateFleet" if kind == "fleet" else "ec2:RunInstances"
        arn = req.arn("ec2", f"{kind}/{NEW}")
        req.check(action, arn, request_tags(tags))
        if tags:
            req.check("ec2:CreateTags", arn, {**request_tags(tags), "ec2:CreateAction": create_action})
    for lt, _ in templates:
        arn = req.arn("ec2", f"launch-template/{lt.id}")
        for action in ("ec2:RunInstances", "ec2:CreateFleet") if create_action == "CreateFleet" else ("ec2:RunInstances",):
            req.check(action, arn, resource_tags(ec2_tags(req, lt.id)))
    for rid in sorted(set(subnets) | set(groups)):
        req.check("ec2:RunInstances", ec2_arn(req, rid), resource_tags(ec2_tags(req, rid)))
    for image in sorted(set(images)):
        req.check("ec2:RunInstances", ec2_arn(req, image))
    for role in profile_roles(req, profile):
        req.check("iam:PassRole", role, {"iam:PassedToService": "ec2.amazonaws.com"})


def ec2_checks(req: Request) -> None:
    q = req.query()
    name = req.name
    if name.startswith(("Describe", "Get")):
        req.check("ec2:" + name, "*")
        return
    if name == "CreateLaunchTemplate":
        tags = tag_specs(q).get("launch-template", {})
        arn = req.arn("ec2", f"launch-template/{NEW}")
        req.check("ec2:CreateLaunchTemplate", arn, request_tags(tags))
        if tags:
            req.check("ec2:CreateTags", arn, {**request_tags(tags), "ec2:CreateAction": "CreateLaunchTemplate"})
        return
    if name == "CreateFleet":
        templates, subnets, images = [], [], []
        for cfg in members(q, "LaunchTemplateConfigs"):
            lt = launch_template(req, cfg, "LaunchTemplateSpecification.")
            if lt is None:
                raise Unmapped("CreateFleet launch template config without a template")
            data = template_version(lt, cfg.get("LaunchTemplateSpecification.Version"))
            templates.append((lt, data))
            overrides = members(cfg, "Overrides")
            subnets += [o["SubnetId"] for o in overrides if o.get("SubnetId")]
            images += [o["ImageId"] for o in overrides if o.get("ImageId")]
            if data.get("ImageId") and not any(o.get("ImageId") for o in overrides):
                images.append(data["ImageId"])
        groups = [g for _, d in templates for g in lt_security_groups(d)]
        spot = q.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot"
        profile = next((d.get("IamInstanceProfile") for _, d in templates if d.get("IamInstanceProfile")), None)
        launch_checks(req, "CreateFleet", tag_specs(q), templates, subnets, images, groups, spot, profile)
        return
    if name == "RunInstances":
        templates = []
        lt = launch_template(req, q, "LaunchTemplate.")
        if lt is not None:
            templates.append((lt, template_version(lt, q.get("LaunchTemplate.Version"))))
        data = templates[0][1] if templates else {}
        images = [q.get("ImageId") or data.get("ImageId")] if (q.get("ImageId") or data.get("ImageId")) else []
        subnets = [q["SubnetId"]] if q.get("SubnetId") else []
        groups = values(q, "SecurityGroupId") + lt_security_groups(data)
        spot = q.get("InstanceMarketOptions.MarketType") == "spot"
        profile = None
        if q.get("IamInstanceProfile.Arn") or q.get("IamInstanceProfile.Name"):
            profile = {"Arn": q.get("IamInstanceProfile.Arn"), "Name": q.get("IamInstanceProfile.Name")}
        else:
            profile = data.get("IamInstanceProfile")
        launch_checks(req, "RunInstances", tag_specs(q), templates, subnets, images, groups, spot, profile)
        return
    if name in ("CreateTags", "DeleteTags"):
        tags = query_tags(q, "Tag")
        for rid in values(q, "ResourceId"):
            ctx = resource_tags(ec2_tags(req, rid))
            ctx.update(request_tags(tags) if name == "CreateTags" else {"aws:TagKeys": sorted(tags)})
            req.check("ec2:" + name, ec2_arn(req, rid), ctx)
        return
    if name in ("TerminateInstances", "StopInstances", "StartInstances", "RebootInstances", "ModifyInstanceAttribute"):
        ids = values(q, "InstanceId") or ([q["InstanceId"]] if q.get("InstanceId") else [])
        for iid in ids:
            req.check("ec2:" + name, ec2_arn(req, iid), resource_tags(ec2_tags(req, iid)))
        return
    if name in ("DeleteLaunchTemplate", "CreateLaunchTemplateVersion", "ModifyLaunchTemplate"):
        lt = launch_template(req, q)
        if lt is None:
            raise Unmapped(f"{name} without a launch template ID or name")
        req.check("ec2:" + name, req.arn("ec2", f"launch-template/{lt.id}"), resource_tags(ec2_tags(req, lt.id)))
        return
    raise Unmapped(f"ec2:{name}")


def ssm_parameter_arn(req: Request, name: str) -> str:
    path = name if name.startswith("/") else "/" + name
    # AWS's public parameters (AMI IDs) belong to no account.
    account = "" if path.startswith("/aws/service/") else None
    return req.arn("ssm", "parameter" + path, account=account)


def ssm_checks(req: Request) -> None:
    body = req.json()
    if req.name in ("GetParameter", "GetParameters", "PutParameter", "DeleteParameter", "GetParameterHistory"):
        for n in body.get("Names") or [body.get("Name")]:
            req.check("ssm:" + req.name, ssm_parameter_arn(req, n))
        return
    if req.name == "GetParametersByPath":
        req.check("ssm:" + req.name, ssm_parameter_arn(req, body.get("Path", "/")))
        return
    raise Unmapped(f"ssm:{req.name}")


def secretsmanager_checks(req: Request) -> None:
    body = req.json()
    if req.name in ("GetSecretValue", "DescribeSecret"):
        sid = body.get("SecretId", "")
        be = secretsmanager_backends[req.account][req.region]
        try:
            secret = be.describe_secret(sid)
            arn, tags = secret.arn, {t["Key"]: t["Value"] for t in (secret.tags or [])}
        except Exception:  # not found: moto answers ResourceNotFoundException after the check
            arn, tags = (sid if sid.startswith("arn:") else req.arn("secretsmanager", f"secret:{sid}")), {}
        req.check("secretsmanager:" + req.name, arn, resource_tags(tags))
        return
    raise Unmapped(f"secretsmanager:{req.name}")


def events_checks(req: Request) -> None:
    body = req.json()
    if req.name != "PutEvents":
        raise Unmapped(f"events:{req.name}")
    be = events_backends[req.account][req.region]
    # AWS authorizes each entry: its bus, source and detail-type.
    for entry in body.get("Entries", []):
        bus_name = entry.get("EventBusName") or "default"
        if bus_name.startswith("arn:"):
            bus_name = bus_name.split("/", 1)[1]
        bus = be.event_buses.get(bus_name)
        policy = json.loads(bus.policy) if bus is not None and bus.policy else None
        # Both keys are multivalued (ArrayOfString in AWS's service reference): one
        # value per entry; a missing one is absent, so Null conditions see it.
        ctx = {}
        if entry.get("Source"):
            ctx["events:source"] = [entry["Source"]]
        if entry.get("DetailType"):
            ctx["events:detail-type"] = [entry["DetailType"]]
        req.check("events:PutEvents", req.arn("events", f"event-bus/{bus_name}"), ctx, resource_policy=policy)


def eks_checks(req: Request) -> None:
    path = req.r._path.split("?")[0].strip("/").split("/")
    if req.name == "DescribeCluster" and len(path) >= 2 and path[0] == "clusters":
        req.check("eks:DescribeCluster", req.arn("eks", f"cluster/{path[1]}"))
        return
    raise Unmapped(f"eks:{req.name}")


def profile_tags(ip: Any) -> dict[str, str]:
    """An instance profile's tags: moto keeps them as the request's list of
    {"Key", "Value"} (older versions as a dict of those by key)."""
    tags = ip.tags.values() if isinstance(ip.tags, dict) else (ip.tags or [])
    return {t["Key"]: t.get("Value", "") for t in tags}


def iam_checks(req: Request) -> None:
    q = req.query()
    iam = iam_backends[req.account][PARTITION]
    name = req.name
    profile_actions = ("GetInstanceProfile", "CreateInstanceProfile", "DeleteInstanceProfile",
                       "AddRoleToInstanceProfile", "RemoveRoleFromInstanceProfile",
                       "TagInstanceProfile", "UntagInstanceProfile")
    if name in profile_actions:
        pname = q.get("InstanceProfileName", "")
        try:
            ip = iam.get_instance_profile(pname)
            arn, tags = ip.arn, profile_tags(ip)
        except Exception:
            arn, tags = req.arn("iam", "instance-profile" + q.get("Path", "/") + pname), {}
        ctx = resource_tags(tags)
        if name == "CreateInstanceProfile":
            ctx.update(request_tags(query_tags(q, "Tags.member")))
        if name == "TagInstanceProfile":
            ctx.update(request_tags(query_tags(q, "Tags.member")))
        req.check("iam:" + name, arn, ctx)
        if name == "AddRoleToInstanceProfile" and q.get("RoleName"):
            role = iam.get_role(q["RoleName"])
            req.check("iam:PassRole", role.arn, {"iam:PassedToService": "ec2.amazonaws.com"})
        return
    if name in ("GetRole",):
        req.check("iam:GetRole", req.arn("iam", "role/" + q.get("RoleName", "")))
        return
    if name in ("ListInstanceProfiles", "ListInstanceProfilesForRole"):
        req.check("iam:" + name, "*")
        return
    raise Unmapped(f"iam:{name}")


def pricing_checks(req: Request) -> None:
    # The Price List query API has no resource-level permissions.
    if req.name in ("GetProducts", "DescribeServices", "GetAttributeValues"):
        req.check("pricing:" + req.name, "*")
        return
    raise Unmapped(f"pricing:{req.name}")


CHECKS = {
    "ec2": ec2_checks,
    "ssm": ssm_checks,
    "secretsmanager": secretsmanager_checks,
    "events": events_checks,
    "eks": eks_checks,
    "iam": iam_checks,
    "pricing": pricing_checks,
}


# --- the errors AWS answers with -------------------------------------------------------


class UnauthorizedOperation(_RESTError):
    code = 403

    def __init__(self, message: str):
        super().__init__("UnauthorizedOperation", message)


class QueryErrorXML(_RESTError):
    """IAM's and STS's errors (the query protocol's ErrorResponse > Error, which the
    SDKs decode; _RESTError's own body nests it in Errors as EC2 does)."""

    code = 403

    def __init__(self, error: str, message: str):
        super().__init__(error, message)
        from xml.sax.saxutils import escape

        self.description = ('<?xml version="1.0" encoding="utf-8"?>\n<ErrorResponse><Error><Type>Sender</Type>'
                            f"<Code>{escape(error)}</Code><Message>{escape(message)}</Message></Error>"
                            "<RequestId>moto-iam</RequestId></ErrorResponse>")


class AccessDeniedXML(QueryErrorXML):
    def __init__(self, message: str):
        super().__init__("AccessDenied", message)


class AccessDeniedJSON(JsonRESTError):
    code = 400

    def __init__(self, message: str):
        super().__init__("AccessDeniedException", message)


def refuse(service: str, message: str) -> Exception:
    if service == "ec2":
        return UnauthorizedOperation(message)
    if service in ("iam", "sts"):
        return AccessDeniedXML(message)
    return AccessDeniedJSON(message)


# --- the hooks -------------------------------------------------------------------------

# AWS's public SSM parameters belong to no account: arn:aws:ssm:<region>::parameter/aws/...
# (the stack grants exactly that). iam-simulate's resource types require an account
# in an SSM parameter ARN and refuse to evaluate such a request (no.resource.types).
# Both the request's ARN and the policies' SSM ARNs without an account get the same
# stand-in account, which no real ARN has, so matching is unchanged: a policy naming
# the account-less ARN matches it, one naming an account's parameters does not.
PUBLIC_PARAMETER = re.compile(r"^arn:aws[a-z-]*:ssm:[^:]*::parameter/")
_ACCOUNTLESS_SSM = re.compile(r'(arn:aws[a-z-]*:ssm:[^:"]*)::parameter/')
PUBLIC_STAND_IN = "000000000000"


def public_parameter_stand_in(resource: str, policies: list[Any]) -> tuple[str, list[Any]]:
    repl = r"\1:" + PUBLIC_STAND_IN + ":parameter/"
    return _ACCOUNTLESS_SSM.sub(repl, resource), json.loads(_ACCOUNTLESS_SSM.sub(repl, json.dumps(policies)))


_moto_check_action_permitted = access_control.IAMRequest.check_action_permitted


def check_action_permitted(self: Any, resource: str) -> None:
    key = self._access_key
    if self._action == "sts:GetCallerIdentity" or not isinstance(key, access_control.AssumedRoleAccessKey):
        return _moto_check_action_permitted(self, resource)
    iam = iam_backends[self.account_id][PARTITION]
    role = iam.get_role(key._owner_role_name)
    req = Request(self, key.arn, role.arn)
    entry: dict[str, Any] = {"principal": key.arn, "role": role.arn, "request": self._action}
    service = req.service
    try:
        fn = CHECKS.get(service)
        if fn is None:
            raise Unmapped(self._action)
        fn(req)
        policies = [access_control.IAMPolicy(p)._policy_json for p in key.collect_policies()]
        entry["checks"] = []
        for c in req.checks:
            resource, identity = c["resource"], policies
            if PUBLIC_PARAMETER.match(resource):
                resource, identity = public_parameter_stand_in(resource, policies)
            result, detail = evaluate({
                "principal": key.arn, "action": c["action"], "resource": resource, "accountId": self.account_id,
                "context": c["context"], "identityPolicies": identity, "resourcePolicy": c["resourcePolicy"],
            })
            entry["checks"].append({"action": c["action"], "resource": c["resource"], "context": c["context"], "result": result})
            if result != "Allowed":
                raise Refused(c, result, detail)
        entry["result"] = "Allowed"
        log(entry)
    except Unmapped as e:
        entry.update(result="Unmapped", detail=str(e))
        log(entry)
        raise refuse(service, f"moto_iam.py has no authorization mapping for {e}; refused so that no call passes unchecked")
    except Refused as e:
        entry.update(result=e.result, refused=e.check, detail=e.detail)
        log(entry)
        raise refuse(service, f"User: {key.arn} is not authorized to perform: {e.check['action']} on resource: "
                              f"{e.check['resource']} ({e.result}{': ' + e.detail if e.detail else ''})")


# moto 5.2.1 recomputes a SigV4 signature over the request's `body or data`; for a
# request with neither query nor body (a restJson GET such as eks:DescribeCluster) its
# data are the request's headers (moto's last fallback for parameters), so the payload
# hash is not the empty body's and every such request is refused SignatureDoesNotMatch.
# A GET, HEAD or DELETE is checked over its body, empty, as it was signed.
_moto_create_aws_request = access_control.IAMRequestBase._create_aws_request


def create_aws_request(self: Any) -> Any:
    if self._method not in ("GET", "HEAD", "DELETE") or self._body:
        return _moto_create_aws_request(self)
    data = self._data
    self._data = b""
    try:
        return _moto_create_aws_request(self)
    finally:
        self._data = data


_moto_authenticate = authorization.ActionAuthenticatorMixin._authenticate_and_authorize_action


def _enforcing() -> bool:
    return authorization.ActionAuthenticatorMixin.request_count >= settings.INITIAL_NO_AUTH_ACTION_COUNT


def _b64json(part: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def check_web_identity(self: Any) -> None:
    q = flat(self.querystring)
    account = self.current_account
    iam = iam_backends[account][PARTITION]
    role_arn = q.get("RoleArn", "")
    entry: dict[str, Any] = {"principal": "web-identity", "request": "sts:AssumeRoleWithWebIdentity", "role": role_arn}
    try:
        claims = _b64json(q.get("WebIdentityToken", "").split(".")[1])
        issuer = claims["iss"].removeprefix("https://")
        aud = claims["aud"][0] if isinstance(claims["aud"], list) else claims["aud"]
        provider = f"arn:{PARTITION}:iam::{account}:oidc-provider/{issuer}"
        if provider not in iam.open_id_providers:
            raise Refused({"action": "sts:AssumeRoleWithWebIdentity", "resource": role_arn}, "InvalidIdentityToken",
                          f"no OpenIDConnect provider {provider}")
        if aud not in iam.open_id_providers[provider].client_id_list:
            raise Refused({"action": "sts:AssumeRoleWithWebIdentity", "resource": role_arn}, "InvalidIdentityToken",
                          f"audience {aud} is not a client ID of {provider}")
        trust = json.loads(iam.get_role_by_arn(role_arn).assume_role_policy_document)
        context = {issuer + ":sub": claims.get("sub", ""), issuer + ":aud": aud, issuer + ":amr": claims.get("amr", "")}
        # iam-simulate ignores condition keys it does not know, and an OIDC
        # provider's keys (<issuer>:sub, :aud) are such keys: it would drop them and
        # judge the statement without them. They are evaluated here instead, and
        # iam-simulate judges the rest of the trust policy (principal, action, any
        # other condition).
        trust = irsa_trust(trust, issuer, context)
        result, detail = evaluate({"principal": provider, "action": "sts:AssumeRoleWithWebIdentity", "resource": role_arn,
                                   "accountId": account, "context": {}, "identityPolicies": [], "resourcePolicy": trust})
        entry.update(result=result, context=context)
        log(entry)
        if result != "Allowed":
            raise Refused({"action": "sts:AssumeRoleWithWebIdentity", "resource": role_arn}, result, detail)
    except Refused as e:
        if "result" not in entry:
            entry.update(result=e.result, detail=e.detail)
            log(entry)
        raise AccessDeniedXML(f"Not authorized to perform sts:AssumeRoleWithWebIdentity on {role_arn} ({e.result}: {e.detail})")
    except (KeyError, IndexError, ValueError) as e:
        entry.update(result="InvalidIdentityToken", detail=str(e))
        log(entry)
        raise AccessDeniedXML(f"invalid web identity token: {e}")


def _string_match(op: str, value: str, wants: Any) -> bool:
    """One string condition operator on a single-valued key, as IAM evaluates it:
    any of the listed values matches (Like: * and ? wildcards)."""
    wants = wants if isinstance(wants, list) else [wants]
    base = op.removesuffix("IfExists")
    if base in ("StringEquals", "StringNotEquals"):
        hit = any(value == w for w in wants)
    elif base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        hit = any(value.lower() == str(w).lower() for w in wants)
    elif base in ("StringLike", "StringNotLike"):
        hit = any(fnmatch.fnmatchcase(value, str(w).replace("[", "[[]")) for w in wants)
    else:
        raise Refused({"action": "sts:AssumeRoleWithWebIdentity", "resource": ""}, "Error",
                      f"condition operator {op} on an OIDC provider key is not evaluated by moto_iam.py")
    return not hit if "Not" in base else hit


def irsa_trust(trust: dict[str, Any], issuer: str, context: dict[str, str]) -> dict[str, Any]:
    """The trust policy with its conditions on the OIDC provider's keys
    (<issuer>:sub, :aud, :amr) decided against the token's claims: a statement whose
    such conditions all hold keeps the rest of its conditions; one where any fails
    does not apply to this request and is left out."""
    out = []
    statements = trust.get("Statement", [])
    for st in statements if isinstance(statements, list) else [statements]:
        applies = True
        rest: dict[str, Any] = {}
        for op, kv in (st.get("Condition") or {}).items():
            keep = {}
            for key, wants in kv.items():
                if not key.startswith(issuer + ":"):
                    keep[key] = wants
                    continue
                if key not in context:
                    raise Refused({"action": "sts:AssumeRoleWithWebIdentity", "resource": ""}, "Error",
                                  f"trust condition key {key} is not one an OIDC provider supplies (sub, aud, amr)")
                if not _string_match(op, context[key], wants):
                    applies = False
            if keep:
                rest[op] = keep
        if applies:
            st = dict(st)
            if rest:
                st["Condition"] = rest
            else:
                st.pop("Condition", None)
            out.append(st)
    return dict(trust, Statement=out)


def authenticate_and_authorize(self: Any, iam_request_cls: type, resource: str = "*") -> None:
    if _enforcing() and self._get_action() == "AssumeRoleWithWebIdentity" and "Authorization" not in self.headers:
        # Unsigned in AWS too: the token is the credential.
        check_web_identity(self)
        return
    if _enforcing() and self._get_action() == "GetCallerIdentity" and presigned(self):
        # Allowed to anyone (AWS allows it even under an explicit deny); its
        # authentication is get_caller_identity's.
        return
    _moto_authenticate(self, iam_request_cls, resource)


# --- Presigned GetCallerIdentity --------------------------------------------------------
#
# An EKS bearer token is "k8s-aws-v1." and the base64 of a presigned STS
# GetCallerIdentity URL that signs the x-k8s-aws-id header (the cluster's name). The
# API server's authenticator (aws-iam-authenticator, EKS's own) replays that URL to STS
# with the header set to its own cluster's name, and maps the ARN STS answers with to a
# Kubernetes user. moto 5.2.1 reads the caller from an Authorization header only: a
# presigned request is answered as moto's default user without any check when IAM is
# not enforced, and fails (KeyError, HTTP 500) when it is. Here STS authenticates it as
# AWS does: the SigV4 query signature, recomputed with the secret of the access key in
# X-Amz-Credential, over the signed headers as received (so a token replayed for another
# cluster does not match); the session token of an assumed role's key; and the time,
# STS accepting a presigned GetCallerIdentity for 15 minutes from X-Amz-Date whatever
# its X-Amz-Expires says (aws-iam-authenticator relies on that). moto_server also routes
# a request without an Authorization header by its body or path, which sends this one
# to S3: it is routed by its credential scope, as a signed request is.

PRESIGNED_LIFETIME_SECONDS = 15 * 60
CLOCK_SKEW_SECONDS = 5 * 60


def presigned(response: Any) -> bool:
    return "Authorization" not in response.headers and "X-Amz-Signature" in response.querystring


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def _uri_encode(v: str) -> str:
    return quote(v, safe="-_.~")


def presigned_caller(response: Any) -> str:
    """The access key ID that signed the presigned request, once its signature, session
    token and time are checked; STS's error otherwise."""
    q = flat(response.querystring)
    try:
        akid, day, region, service, terminator = q["X-Amz-Credential"].split("/")
        signed = q["X-Amz-SignedHeaders"].split(";")
        amz_date = q["X-Amz-Date"]
        at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        signature = q["X-Amz-Signature"]
    except (KeyError, ValueError) as e:
        raise QueryErrorXML("IncompleteSignature", f"the presigned request lacks or garbles {e}")
    if q.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or service != "sts" or terminator != "aws4_request" \
            or day != amz_date[:8] or "host" not in signed:
        raise QueryErrorXML("IncompleteSignature", "not a SigV4 presigned STS request signing the host header")
    age = (datetime.now(timezone.utc) - at).total_seconds()
    if age > PRESIGNED_LIFETIME_SECONDS or age < -CLOCK_SKEW_SECONDS:
        raise QueryErrorXML("SignatureDoesNotMatch", f"Signature expired: {amz_date} is more than 15 minutes from now")
    headers = {"X-Amz-Security-Token": q["X-Amz-Security-Token"]} if "X-Amz-Security-Token" in q else {}
    try:
        key = access_control.create_access_key(account_id=response.current_account, partition=PARTITION,
                                               access_key_id=akid, headers=headers)
    except access_control.CreateAccessKeyFailure:
        raise QueryErrorXML("InvalidClientTokenId", "The security token included in the request is invalid.")
    query = "&".join(f"{_uri_encode(k)}={_uri_encode(v)}" for k, v in sorted(q.items()) if k != "X-Amz-Signature")
    canonical_headers = "".join(f"{h}:{' '.join(str(response.headers.get(h, '')).split())}\n" for h in signed)
    body = response.raw_body if isinstance(response.raw_body, bytes) else (response.raw_body or "").encode("utf-8")
    canonical = "\n".join([response.method, urlparse(response.uri).path or "/", query, canonical_headers,
                           ";".join(signed), hashlib.sha256(body).hexdigest()])
    scope = f"{day}/{region}/sts/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    k = _hmac(("AWS4" + key._secret_access_key).encode("utf-8"), day)
    for part in (region, "sts", "aws4_request"):
        k = _hmac(k, part)
    if not hmac.compare_digest(hmac.new(k, to_sign.encode("utf-8"), hashlib.sha256).hexdigest(), signature):
        raise QueryErrorXML("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
    return akid


_moto_infer_service = DomainDispatcherApplication.infer_service_region_host


def infer_service_region_host(self: Any, environ: dict[str, Any], path: str) -> str | None:
    if not environ.get("HTTP_AUTHORIZATION"):
        scope = parse_qs(environ.get("QUERY_STRING", "")).get("X-Amz-Credential", [""])[0].split("/")
        if len(scope) == 5 and scope[3] == "sts":
            return f"sts.{scope[2]}.amazonaws.com"
    return _moto_infer_service(self, environ, path)


_moto_get_caller_identity = TokenResponse.get_caller_identity


def get_caller_identity(self: Any) -> Any:
    if not presigned(self):
        return _moto_get_caller_identity(self)
    akid = presigned_caller(self)
    user_id, arn, account = sts_backends[self.current_account][PARTITION].get_caller_identity(akid, self.region)
    log({"principal": arn, "request": "sts:GetCallerIdentity", "result": "Allowed", "detail": "presigned"})
    return ActionResult({"UserId": user_id, "Account": account, "Arn": arn})


# --- EKS clusters -----------------------------------------------------------------------
#
# moto's EKS CreateCluster gives a cluster a made-up endpoint and random CA data, and has
# no call that changes them. $MOTO_EKS_CLUSTERS names a JSON file {name: {"endpoint",
# "certificateAuthority" (base64 PEM, as DescribeCluster has it), "version"}} the test
# writes: DescribeCluster of a cluster created under that name answers with the API
# server it stands for.

_moto_describe_cluster = EKSBackend.describe_cluster


def describe_cluster(self: Any, name: str) -> Any:
    cluster = _moto_describe_cluster(self, name)
    path = os.environ.get("MOTO_EKS_CLUSTERS")
    if not path:
        return cluster
    try:
        with open(path, encoding="utf-8") as f:
            served = json.load(f).get(name)
    except FileNotFoundError:
        return cluster
    if served:
        cluster.endpoint = served["endpoint"]
        cluster.certificate_authority = {"data": served["certificateAuthority"]}
        cluster.version = served.get("version") or cluster.version
    return cluster


# --- EventBridge targets ---------------------------------------------------------------
#
# moto 5.2.1 raises NotImplementedError for a rule's Lambda target, which fails the whole
# PutEvents (HTTP 500) before the rule's other targets get the event. moto cannot invoke
# a function without Docker; the tests run the deployed functions themselves. So a
# Lambda target is recorded ($MOTO_LAMBDA_DELIVERIES, JSON lines: rule, target ARN,
# event) and the other targets get the event as EventBridge would deliver it.

_moto_send_to_targets = events_models.Rule.send_to_targets
_deliveries_lock = threading.Lock()


def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
    if not self.event_pattern.matches_event(original_event):
        return
    lambdas = [t for t in self.targets if t["Arn"].split(":")[2] == "lambda"]
    path = os.environ.get("MOTO_LAMBDA_DELIVERIES")
    if lambdas and path:
        # As EventBridge delivers it (and moto formats it for an SQS target): the
        # time in ISO 8601, without moto's internal ingestion-time.
        delivered = {k: v for k, v in original_event.items() if k != "ingestion-time"}
        if isinstance(delivered.get("time"), (int, float)):
            delivered["time"] = iso_8601_datetime_without_milliseconds(utcfromtimestamp(float(delivered["time"])))
        with _deliveries_lock, open(path, "a", encoding="utf-8") as f:
            for t in lambdas:
                f.write(json.dumps({"rule": self.name, "target": t["Arn"], "event": delivered}, default=str) + "\n")
    others = [t for t in self.targets if t not in lambdas]
    saved = self.targets
    try:
        self.targets = others
        _moto_send_to_targets(self, original_event, transform_input)
    finally:
        self.targets = saved


# --- Public parameters -----------------------------------------------------------------
#
# moto ships a few of AWS's public SSM parameters (/aws/service/ami-amazon-linux-latest,
# ecs) but not the EKS optimized AMI ones an EC2NodeClass alias resolves, and refuses
# PutParameter under /aws/ (reserved, as AWS does). $MOTO_PUBLIC_PARAMETERS names a JSON
# file {name: value} the test writes; a missing /aws/service/ parameter is looked up in
# it, so the functions read it with GetParameter as they would in an account.

_moto_check_loading_status = ssm_models.ParameterDict._check_loading_status


def check_loading_status(self: Any, key: str) -> None:
    _moto_check_loading_status(self, key)
    key = str(key or "")
    path = os.environ.get("MOTO_PUBLIC_PARAMETERS")
    if not path or not key.startswith("/aws/service/") or defaultdict.__contains__(self, key):
        return
    try:
        with open(path, encoding="utf-8") as f:
            published = json.load(f)
    except FileNotFoundError:
        return
    for name, value in published.items():
        if name.startswith(key) and not defaultdict.__contains__(self, name):
            defaultdict.__getitem__(self, name).append(ssm_models.Parameter(
                account_id=self.account_id, name=name, value=value, parameter_type="String", description=None,
                allowed_pattern=None, keyid=None, last_modified_date=ssm_models.utcnow(), version=1, data_type="aws:ec2:image"))


# --- TestEventPattern -------------------------------------------------------------
#
# moto 5.2.1 routes TestEventPattern to an empty handler (the SDK cannot decode its
# answer). It is answered here with moto's own pattern matcher, the one that decides
# which rules' targets get a PutEvents entry, after the checks AWS documents: the
# event must carry id, account, source, time, region and detail-type, and the
# pattern must be valid JSON.

_EVENT_FIELDS = ("id", "account", "source", "time", "region", "detail-type")


def test_event_pattern(self: Any) -> Any:
    try:
        event = json.loads(self._get_param("Event") or "")
    except ValueError as e:
        return self.error("InvalidEventPatternException", f"Event is not valid JSON: {e}")
    if not isinstance(event, dict):
        return self.error("InvalidEventPatternException", "Event must be a JSON object")
    missing = [f for f in _EVENT_FIELDS if f not in event]
    if missing:
        return self.error("InvalidEventPatternException", "Parameter(s) " + ", ".join(missing) + " must be specified.")
    try:
        pattern = events_models.EventPattern.load(self._get_param("EventPattern"))
    except Exception as e:  # moto raises its own validation errors
        return self.error("InvalidEventPatternException", f"Event pattern is not valid: {e}")
    return json.dumps({"Result": bool(pattern.matches_event(event))}), self.response_headers


# --- CreateFleet's instance profile ------------------------------------------------
#
# moto 5.2.1's CreateFleet launches its instances without the launch template's
# IamInstanceProfile (RunInstances associates the one it is given): DescribeInstances
# shows none, so a test could not tell a launch with Joiner's profile from one
# without. Each fleet instance is associated with its launch spec's profile, as EC2
# launches it.

_moto_create_fleet = FleetsBackend.create_fleet


def create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
    fleet = _moto_create_fleet(self, *args, **kwargs)
    launched = [(i["instance"], i.get("launch_spec")) for i in fleet.on_demand_instances]
    launched += [(r.instance, r.launch_spec) for r in fleet.spot_requests]
    for instance, spec in launched:
        profile = getattr(spec, "_iam_instance_profile_arn", None) if spec is not None else None
        if isinstance(profile, str):
            profile = {"Arn": profile}
        if not profile or instance.id in self.iam_instance_profile_associations:
            continue
        self.associate_iam_instance_profile(instance_id=instance.id, iam_instance_profile_name=profile.get("Name"),
                                            iam_instance_profile_arn=profile.get("Arn"))
    return fleet


# --- CloudFormation's role deletion -------------------------------------------------
#
# CloudFormation deletes an AWS::IAM::Role by deleting its inline policies, detaching
# its managed ones and calling DeleteRole, which IAM refuses with DeleteConflict (HTTP
# 409, "Cannot delete entity, must remove roles from instance profile first.") while
# an instance profile holds the role; the stack then stops in DELETE_FAILED, the rest
# of it deleted. That is what happens to the node role when `cdk destroy` runs before
# `joiner cleanup` has deleted the instance profiles Joiner made for it. moto 5.2.1's
# IAM DeleteRole answers DeleteConflict already, but its CloudFormation handler first
# takes the role out of every instance profile (the deletion succeeded where AWS's
# fails, and Joiner's profiles were left empty), and a resource that cannot be deleted
# escapes DeleteStack as HTTP 500 with the stack gone from the list. Here the handler
# refuses as IAM does, and the stack is DELETE_FAILED with AWS's reasons, its
# undeleted resources kept, so that DeleteStack can be retried once the profiles are
# gone.

_moto_delete_role_cfn = iam_models.Role.delete_from_cloudformation_json


def delete_role_from_cloudformation(cls: Any, resource_name: str, cloudformation_json: dict[str, Any],
                                    account_id: str, region_name: str) -> None:
    backend = iam_backends[account_id][PARTITION]
    if any(r.name == resource_name for ip in backend.instance_profiles.values() for r in ip.roles):
        raise DeleteConflictException("Cannot delete entity, must remove roles from instance profile first.")
    _moto_delete_role_cfn(resource_name, cloudformation_json, account_id, region_name)


class StackDeleteFailed(Exception):
    """Stack.delete stopped at a resource: the stack is DELETE_FAILED."""


def _failure_reason(e: Exception) -> str:
    code = getattr(e, "code", "")
    message = getattr(e, "message", "") or str(e)
    if isinstance(e, DeleteConflictException):
        return f"{message} (Service: Iam, Status Code: 409, Error Code: {code})"
    return f"{message} ({code})" if isinstance(code, str) and code else message


def stack_delete(self: Any) -> None:
    self._add_stack_event("DELETE_IN_PROGRESS", resource_status_reason="User Initiated")
    rm = self.resource_map
    try:
        rm.delete()
    except Exception as e:  # noqa: BLE001 - whatever a resource's deletion raised
        reason = _failure_reason(e)
        left = sorted(k for k, v in rm._resource_json_map.items()
                      if v.get("DeletionPolicy") != "Retain" and rm._parsed_resources.get(k) is not None
                      and not isinstance(rm._parsed_resources.get(k), str))
        for logical in left:
            self.events.append(cfn_models.Event(
                stack_id=self.stack_id, stack_name=self.name, logical_resource_id=logical,
                physical_resource_id=getattr(rm._parsed_resources[logical], "physical_resource_id", ""),
                resource_type=rm._resource_json_map[logical].get("Type", ""), resource_status="DELETE_FAILED",
                resource_status_reason=reason, resource_properties=None))
        self.status = "DELETE_FAILED"
        self.stack_status_reason = "The following resource(s) failed to delete: [" + ", ".join(left) + "]. "
        self._add_stack_event("DELETE_FAILED", resource_status_reason=self.stack_status_reason)
        raise StackDeleteFailed(self.stack_status_reason) from e
    self._add_stack_event("DELETE_COMPLETE")
    self.status = "DELETE_COMPLETE"


_moto_delete_stack = cfn_models.CloudFormationBackend.delete_stack


def delete_stack(self: Any, name_or_stack_id: str) -> None:
    stack = next((s for s in self.stacks.values() if name_or_stack_id in (s.stack_id, s.name)), None)
    try:
        _moto_delete_stack(self, name_or_stack_id)
    except StackDeleteFailed:
        # moto took it off the list before deleting; a failed stack stays listed.
        self.stacks[stack.stack_id] = stack
        self.deleted_stacks.pop(stack.stack_id, None)


DomainDispatcherApplication.infer_service_region_host = infer_service_region_host
access_control.IAMRequestBase._create_aws_request = create_aws_request
TokenResponse.get_caller_identity = get_caller_identity
EKSBackend.describe_cluster = describe_cluster
iam_models.Role.delete_from_cloudformation_json = classmethod(delete_role_from_cloudformation)
cfn_models.Stack.delete = stack_delete
cfn_models.CloudFormationBackend.delete_stack = delete_stack
FleetsBackend.create_fleet = create_fleet
EventsHandler.test_event_pattern = test_event_pattern
ssm_models.ParameterDict._check_loading_status = check_loading_status
events_models.Rule.send_to_targets = send_to_targets
access_control.IAMRequest.check_action_permitted = check_action_permitted
authorization.ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate_and_authorize

if __name__ == "__main__":
    server.main(sys.argv[1:])
