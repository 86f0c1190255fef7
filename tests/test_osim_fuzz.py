"""Fuzzing the .osim reader: it never hangs and never raises an unexplained exception.

Hypothesis mutates real model files (truncation, bad numbers, wrong types, unknown
elements, renamed tags, deleted lines, deep nesting, random bytes); every outcome
must be a Model or an ``OsimError`` (file, line, path, reason).
"""

import re
import time
import warnings

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import simjax as sj  # noqa: E402
from simjax.io.osim import OsimError, OsimWarning, loads_osim  # noqa: E402

BASES = [open(sj.models.path(n), encoding="utf-8").read() for n in ("double_pendulum", "arm26")]
ELEMENTS = [
    "<foo>1</foo>",
    '<Body name="x"/>',
    "<Coordinate/>",
    "<mass>2</mass>",
    "<objects/>",
    "<PinJoint name='q'></PinJoint>",
    "<SimmSpline><x>1</x><y>2</y></SimmSpline>",
    "<socket_parent>/x",
    "</objects>",
    "<![CDATA[<mass>]]>",
    "&amp;",
    "<Constant name='function'><value>x</value></Constant>",
]
VALUES = [
    "abc",
    "1e999",
    "nan",
    "",
    "1 2",
    "--1",
    "true",
    "0x10",
    "1_0",
    "Inf",
    "/nowhere",
    "..",
    "../../..",
    "-0",
    "1e-400",
    "\u00e9",
    "9" * 400,
]
TAGS = [
    "Body",
    "PinJoint",
    "FreeJoint",
    "CustomJoint",
    "Constant",
    "SimmSpline",
    "Foo",
    "objects",
    "coordinates",
    "Model",
    "OpenSimDocument",
    "TransformAxis",
    "socket_parent_frame",
    "mass",
]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 7))
        if kind == 0:
            text = text[: draw(st.integers(0, len(text)))]
        elif kind == 1:
            spans = [m.span() for m in re.finditer(r"-?\d+\.?\d*(?:e-?\d+)?", text)]
            if spans:
                a, b = draw(st.sampled_from(spans))
                text = text[:a] + draw(st.sampled_from(VALUES)) + text[b:]
        elif kind == 2:
            ends = [m.end() for m in re.finditer(r">\n", text)]
            if ends:
                p = draw(st.sampled_from(ends))
                text = text[:p] + draw(st.sampled_from(ELEMENTS)) + text[p:]
        elif kind == 3:
            depth = draw(st.integers(1, 400))
            p = text.find("<objects>")
            text = text[:p] + "<a>" * depth + "</a>" * depth + text[p:] if p >= 0 else text
        elif kind == 4:
            spans = [m.span(1) for m in re.finditer(r">([^<>\n]{1,30})<", text)]
            if spans:
                a, b = draw(st.sampled_from(spans))
                text = text[:a] + draw(st.sampled_from(VALUES)) + text[b:]
        elif kind == 5:
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            text = "\n".join(lines[:i] + lines[i + 1 :])
        elif kind == 6:
            spans = [m.span(1) for m in re.finditer(r"</?(\w+)", text)]
            if spans:
                a, b = draw(st.sampled_from(spans))
                text = text[:a] + draw(st.sampled_from(TAGS)) + text[b:]
        else:
            p = draw(st.integers(0, len(text)))
            text = text[:p] + draw(st.text(max_size=8)) + text[p:]
    return text, draw(st.booleans())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_reader_never_fails_unexplained(case):
    text, strict = case
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OsimWarning)
        try:
            model = loads_osim(text, strict=strict, source="fuzz.osim")
        except OsimError as e:
            assert str(e).startswith("fuzz.osim")
        else:
            assert isinstance(model, sj.Model)
    assert time.perf_counter() - start < 10.0
