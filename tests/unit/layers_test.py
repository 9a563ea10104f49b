#!/usr/bin/env python3
"""The layers of shim/ only look down (docs/design/layers.md), and policy/ knows no shim and no CUDA.

Reads every #include of shim/ and policy/ and fails, naming the file, the line and the rule, when:
  - a file of a shim layer includes a layer above it (shim/act including shim/entry, shim/core
    including shim/trace, ...);
  - policy/ includes anything of shim/, or a CUDA header;
  - shim/core includes a CUDA header (the gpumemshim command and the unit tests link it with no CUDA);
  - a quoted include names no file of the tree (it could hide a layer that is not checked).
Before the tree, the rules are run on made-up files, each breaking one rule, so that a checker that
lets a violation through fails too. No GPU, no build output needed: `layers_test.py SOURCE_DIR`.
"""
import os
import re
import sys

# Lowest first. A shim layer may include its own files, the layers before it, and policy/.
SHIM_LAYERS = ["core", "driver", "trace", "observe", "act", "entry"]
# Headers of the build (configure_file), at the level of core.
GENERATED = {"gms/build_config.h"}
# CUDA's headers (the toolkit's, CUPTI's, NVML's, NVTX's) and the shim's own view of cuda.h.
CUDA_HEADER = re.compile(r"^(cuda|cupti|cublas|cufft|curand|cusparse|cusolver|nvml|nvtx|nvToolsExt|driver_types|"
                         r"vector_types|builtin_types|library_types|crt/|thrust/|cub/)")
SHIM_CUDA_VIEW = {"driver/cuda_driver.h", "driver/cuda_hooks.def", "driver/cuda_used.def"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_EXT = (".h", ".cc", ".def", ".cu", ".cuh", ".hpp", ".cpp")


def layer_of(rel):
    """('policy', None) / ('shim', 'act') / (None, None) for a path relative to the source root."""
    parts = rel.split("/")
    if parts[0] == "policy":
        return "policy", None
    if parts[0] == "shim" and len(parts) > 2 and parts[1] in SHIM_LAYERS:
        return "shim", parts[1]
    return None, None


def resolve(rel, target, exists):
    """The file a quoted include names, relative to the source root: next to the including file,
    then under shim/ (the shim's include root), then under the root; 'generated' for build headers."""
    here = os.path.dirname(rel)
    for cand in (os.path.normpath(os.path.join(here, target)), os.path.normpath(os.path.join("shim", target)),
                 os.path.normpath(target)):
        if exists(cand):
            return cand
    if target in GENERATED:
        return "generated"
    return None


def violations(files, exists):
    """files: {relative path: text}. Returns one line per broken rule."""
    out = []
    for rel, text in sorted(files.items()):
        kind, layer = layer_of(rel)
        if kind is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quoted, target = m.group(1) == '"', m.group(2)
            where = "%s:%d: #include %s%s%s" % (rel, n, m.group(1), target, '"' if quoted else ">")
            cuda = CUDA_HEADER.match(target) is not None
            if quoted:
                found = resolve(rel, target, exists)
                if found is None:
                    out.append(where + ": names no file of the tree")
                    continue
                if found == "generated":
                    continue
                cuda = cuda or found.replace("shim/", "", 1) in SHIM_CUDA_VIEW
                to_kind, to_layer = layer_of(found)
                if kind == "policy" and found.startswith("shim/"):
                    out.append(where + ": policy/ includes the shim (policy/ is pure: plain structs, no shim)")
                if kind == "shim" and to_kind == "shim":
                    if SHIM_LAYERS.index(to_layer) > SHIM_LAYERS.index(layer):
                        out.append(where + ": shim/%s looks up at shim/%s (layers only look down: %s)" %
                                   (layer, to_layer, " < ".join(SHIM_LAYERS)))
            if cuda and (kind == "policy" or layer == "core"):
                out.append(where + ": %s includes a CUDA header" % ("policy/" if kind == "policy" else "shim/core/"))
    return out


def self_check():
    """Each rule on made-up files: the clean set passes, and each bad file is caught by its rule."""
    clean = {
        "shim/core/a.h": '#include <cstdint>\n#include "b.h"\n#include "gms/build_config.h"\n',
        "shim/core/b.h": "",
        "shim/driver/calls.h": '#include "core/a.h"\n#include "cuda_driver.h"\n#include <cuda.h>\n',
        "shim/driver/cuda_driver.h": "",
        "shim/trace/t.h": '#include "core/a.h"\n#include "driver/calls.h"\n',
        "shim/observe/o.h": '#include "trace/t.h"\n',
        "shim/act/swap/s.h": '#include "observe/o.h"\n#include "policy/p.h"\n#include "driver/calls.h"\n',
        "shim/entry/e.cc": '#include "act/swap/s.h"\n',
        "policy/p.h": '#include <vector>\n#include "q.h"\n',
        "policy/q.h": "",
    }
    bad = {  # each made-up file, and every rule it must break
        "shim/act/x.cc": ('#include "entry/e.cc"\n', ["looks up at shim/entry"]),
        "shim/act/swap/y.cc": ('#include "entry/e.cc"\n', ["looks up at shim/entry"]),
        "shim/core/x.cc": ('#include "trace/t.h"\n', ["looks up at shim/trace"]),
        "shim/core/y.cc": ('#include <cuda_runtime.h>\n', ["includes a CUDA header"]),
        "shim/core/z.cc": ('#include "driver/cuda_driver.h"\n', ["looks up at shim/driver", "includes a CUDA header"]),
        "shim/trace/x.cc": ('#include "observe/o.h"\n', ["looks up at shim/observe"]),
        "policy/x.cc": ('#include "core/a.h"\n', ["policy/ includes the shim"]),
        "policy/y.cc": ('#include <cuda.h>\n', ["includes a CUDA header"]),
        "policy/z.cc": ('#include <cupti_activity.h>\n', ["includes a CUDA header"]),
        "shim/act/z.cc": ('#include "nowhere/n.h"\n', ["names no file of the tree"]),
    }
    failures = []
    exists = lambda p: p in clean
    got = violations(clean, exists)
    if got:
        failures.append("the clean set was refused: %s" % got)
    for path, (text, rules) in bad.items():
        got = violations({path: text}, exists)
        matched = [rule for rule in rules if any(rule in g for g in got)]
        if matched != rules or len(got) != len(rules):
            failures.append("%s (%r) should break %s, got %s" % (path, text.strip(), rules, got))
    return failures


def read_tree(root):
    files = {}
    for top in ("shim", "policy"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith(SOURCE_EXT):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        files[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
    return files


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    failures = self_check()
    if failures:
        print("the layering checker itself is wrong:\n  " + "\n  ".join(failures))
        return 1
    files = read_tree(root)
    if not any(p.startswith("shim/act/") for p in files):
        print("no shim/act/ under %s: wrong source directory?" % root)
        return 1
    found = violations(files, lambda p: os.path.isfile(os.path.join(root, p)))
    if found:
        print("%d include(s) break the layering (docs/design/layers.md):\n  %s" % (len(found), "\n  ".join(found)))
        return 1
    print("layers only look down: %d files of shim/ and policy/ checked" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
