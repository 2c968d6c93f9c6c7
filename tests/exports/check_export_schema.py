#!/usr/bin/env python3
"""Checks emitted framework files against tests/fixtures/framework_schemas.json.

Usage: check_export_schema.py SCHEMA PATH...
A PATH is a file or a folder of them. Each file is named TARGET--anything.{json,yaml,sh}: deepspeed (ds_config JSON),
accelerate (accelerate config YAML, read by PyYAML as accelerate's
ClusterConfig.from_yaml_file reads it), training_arguments (TrainingArguments
JSON), torchrun (a command line whose --flags are TrainingArguments fields),
torchtitan (job-config TOML, read by tomllib as torchtitan's ConfigManager reads
it) or litgpt (fine-tuning YAML, read by PyYAML).
Prints one line per violation and exits 1 when there is any.
"""
import json
import os
import shlex
import sys
import tomllib

import yaml

TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list}


def flatten(value, prefix=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from flatten(inner, f"{prefix}{key}.")
    else:
        yield prefix[:-1], value


def check_value(rule, value):
    if value is None:
        return None if rule.get("nullable") else f"is null, not {rule['type']}"
    expected = TYPES[rule["type"]]
    if isinstance(value, bool) and rule["type"] != "boolean":
        return f"is {value!r}, a boolean, not {rule['type']}"
    if not isinstance(value, expected):
        return f"is {value!r} ({type(value).__name__}), not {rule['type']}"
    if "enum" in rule and value not in rule["enum"]:
        return f"is {value!r}, not one of {rule['enum']}"
    if "min" in rule and value < rule["min"]:
        return f"is {value!r}, below {rule['min']}"
    return None


def torchrun_arguments(text):
    words = shlex.split(text, comments=True)
    args, i = {}, words.index("train.py") + 1
    while i < len(words):
        name = words[i].removeprefix("--")
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            raw = words[i + 1]
            try:
                args[name] = json.loads(raw)
            except json.JSONDecodeError:
                args[name] = raw
            i += 2
        else:
            args[name] = True
            i += 1
    return args


def load(target, text):
    if target == "accelerate":
        return yaml.safe_load(text)
    if target == "torchrun":
        return torchrun_arguments(text)
    if target == "litgpt":
        return yaml.safe_load(text)
    if target == "torchtitan":
        return tomllib.loads(text)
    return json.loads(text)


def violations(schema, target, data):
    section = schema["training_arguments" if target == "torchrun" else target]
    keys = section["keys"]
    for path, value in flatten(data):
        if path not in keys:
            yield f"{path}: not a key of {target} ({section['source']})"
            continue
        # torchrun passes strings; HfArgumentParser converts them by the field's type.
        if target == "torchrun" and isinstance(value, str) and keys[path]["type"] != "string":
            continue
        problem = check_value(keys[path], value)
        if problem:
            yield f"{path} {problem} ({keys[path].get('source', section['source'])})"
    flat = dict(flatten(data))
    for rule in section.get("rules", []):
        when = rule["when"]
        absent = rule.get("when_absent", [])
        if all(k in flat and flat[k] == v for k, v in when.items()) and not any(k in flat for k in absent):
            for path in rule.get("forbids", []):
                if path in flat:
                    yield f"{path}: not allowed when {when} ({rule['source']})"
            for path in rule.get("requires", []):
                if path not in flat:
                    yield f"{path}: required when {when} ({rule['source']})"


def files(paths):
    for path in paths:
        if os.path.isdir(path):
            yield from sorted(os.path.join(path, name) for name in os.listdir(path))
        else:
            yield path


def main():
    schema = json.load(open(sys.argv[1]))
    failed = checked = 0
    for name in files(sys.argv[2:]):
        checked += 1
        target = name.rsplit("/", 1)[-1].split("--", 1)[0]
        for problem in violations(schema, target, load(target, open(name).read())):
            print(f"{name}: {problem}")
            failed += 1
    print(f"{checked} files checked, {failed} violations")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
