"""Validates Kubernetes objects against the API's own types, as Debian's python3-kubernetes ships them.

python3-kubernetes (22.6.0 in Debian 12) is generated from the Kubernetes 1.22 OpenAPI document:
each model class lists its fields (attribute_map: JSON name), their types (openapi_types) and
refuses a missing required field in its constructor. Walking a manifest through those classes
catches unknown or misspelt fields, wrong types (a number where the API wants a string, a map
where it wants a list) and missing required fields, at every depth.

Not covered (the API server checks these, this does not): value formats (names, label values,
quantities beyond "string or number"), defaulting, cross-field rules (the manifests test checks
the ones fragscope relies on explicitly), fields added after 1.22 (listed in NEWER_FIELDS
when used on purpose), and custom resources (the Prometheus Operator's are checked field by
field in manifests_test.py).
"""

import re

from kubernetes import client  # Debian python3-kubernetes

SCHEMA_VERSION = "1.22 (python3-kubernetes 22.6.0)"

# Fields newer than the bundled schema that the manifests use on purpose: (model, JSON name).
NEWER_FIELDS = {
    ("V1Container", "restartPolicy"): "Kubernetes 1.28: a restartable init container is a sidecar",
}

# Quantities are "string or number" in the API; the generated client types them as strings.
QUANTITY_FIELDS = {("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
                   ("V1EmptyDirVolumeSource", "sizeLimit")}

# Objects that have no namespace (kustomize's `namespace:` leaves them alone too).
CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding", "Node", "RuntimeClass"}


def _snake(kind):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def model_for(api_version, kind):
    """The model class of apiVersion/kind, or None when the bundled API has no such kind."""
    group, _, version = api_version.rpartition("/")
    group_words = group.replace(".k8s.io", "").split(".") if group else ["core"]
    api_class = getattr(client, "".join(w.capitalize() for w in group_words) + version.capitalize() + "Api", None)
    if api_class is None:
        return None
    snake = _snake(kind)
    if not any(hasattr(api_class, f"create_{scope}{snake}") for scope in ("", "namespaced_")):
        return None
    return getattr(client, version.capitalize() + kind, None)


def _type_errors(value, type_name, path, quantity=False, partial=False):
    if type_name == "object":  # IntOrString, RawExtension: anything
        return []
    if type_name.startswith("list["):
        if not isinstance(value, list):
            return [f"{path}: must be a list"]
        inner = type_name[5:-1]
        return [e for i, item in enumerate(value) for e in _type_errors(item, inner, f"{path}[{i}]", partial=partial)]
    if type_name.startswith("dict("):
        if not isinstance(value, dict):
            return [f"{path}: must be a map"]
        inner = type_name[type_name.index(",") + 1:-1].strip()
        return [e for key, item in value.items()
                for e in _type_errors(item, inner, f"{path}.{key}", quantity, partial)]
    if type_name == "str":
        ok = isinstance(value, str) or (quantity and isinstance(value, (int, float)) and not isinstance(value, bool))
        return [] if ok else [f"{path}: must be a string, not {type(value).__name__} {value!r}"]
    if type_name == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: must be an integer, not {value!r}"]
    if type_name == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: must be a number, not {value!r}"]
    if type_name == "bool":
        return [] if isinstance(value, bool) else [f"{path}: must be true or false, not {value!r}"]
    if type_name in ("datetime", "date"):
        return [] if isinstance(value, str) else [f"{path}: must be a timestamp string"]
    model = getattr(client, type_name)
    return _model_errors(value, model, path, partial)


def _model_errors(value, model, path, partial):
    if not isinstance(value, dict):
        return [f"{path}: must be an object ({model.__name__})"]
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    errors, present = [], {}
    for key, item in value.items():
        if (model.__name__, key) in NEWER_FIELDS:
            continue
        attr = by_json.get(key)
        if attr is None:
            errors.append(f"{path}.{key}: unknown field of {model.__name__}")
            continue
        present[attr] = item
        quantity = (model.__name__, key) in QUANTITY_FIELDS
        errors += _type_errors(item, model.openapi_types[attr], f"{path}.{key}", quantity, partial)
    if partial:  # a patch: only what it sets is checked
        return errors
    # The generated constructor refuses a required field left out (and some enum values).
    try:
        model(**{attr: item if item is not None else "" for attr, item in present.items()})
    except ValueError as e:
        missing = re.search(r"`(\w+)`, must not be `None`", str(e))
        if missing:
            errors.append(f"{path}.{model.attribute_map[missing.group(1)]}: required by {model.__name__}")
        else:
            errors.append(f"{path}: {e}")
    return errors


def validate(obj, where="", partial=False):
    """Errors of one object (a parsed manifest), [] when it fits the API's schema. partial: a
    strategic-merge patch, whose required fields live in the object it patches."""
    if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
        return [f"{where}: not a Kubernetes object (apiVersion and kind are required)"]
    model = model_for(obj["apiVersion"], obj["kind"])
    if model is None:
        return [f"{where}: {obj['apiVersion']} {obj['kind']} is not in the Kubernetes {SCHEMA_VERSION} API"]
    name = obj.get("metadata", {}).get("name", "?")
    return _model_errors(obj, model, f"{where}{obj['kind']}/{name}", partial)
