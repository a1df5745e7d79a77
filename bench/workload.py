"""The program bench/formats.sh profiles with Callgrind to get a big profile.

It exercises much of the interpreter and of the C libraries Python uses (zlib,
libexpat, sqlite, libffi, libm), so that Callgrind with --separate-callers sees
many distinct call chains. `workload.py small` only does a few imports.
"""

import sys

if sys.argv[1:] == ["small"]:
    import json
    import email.parser
    import decimal

    print(json.dumps({"a": [1, 2.5, "x"]}), decimal.Decimal(1) / 7)
    sys.exit(0)

import argparse, ast, asyncio, base64, collections, configparser, copy, csv, dataclasses
import datetime, decimal, difflib, email, email.parser, fractions, functools, hashlib
import html.parser, http.client, http.server, inspect, io, itertools, json, logging
import pathlib, pickle, pprint, pydoc, random, re, shutil, sqlite3, statistics, string
import tarfile, tempfile, textwrap, typing, unittest, urllib.request, zipfile, zlib
import xml.dom.minidom
import xml.etree.ElementTree as ET

d = {str(i): [i, i * 0.5, str(i)] for i in range(20000)}
s = json.dumps(d)
json.loads(s)
pickle.loads(pickle.dumps(d))
ast.parse(inspect.getsource(pydoc))
compile(inspect.getsource(argparse), "argparse.py", "exec")
list(difflib.unified_diff(s[:20000].split(","), s[100:20100].split(",")))
print(sum(decimal.Decimal(i) / 7 for i in range(20000)))
print(sum(fractions.Fraction(i, 7) for i in range(3000)))
ET.fromstring("<a>" + '<b x="1">t</b>' * 5000 + "</a>")
xml.dom.minidom.parseString("<a>" + '<b x="1">t</b>' * 2000 + "</a>").toxml()
db = sqlite3.connect(":memory:")
db.execute("create table t (a integer, b text)")
db.executemany("insert into t values (?, ?)", ((i, str(i)) for i in range(20000)))
print(db.execute("select count(*), sum(a) from t where b like '1%'").fetchone())
with zipfile.ZipFile(io.BytesIO(), "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("a.json", s)
with tarfile.open(fileobj=io.BytesIO(), mode="w:gz") as t:
    data = s.encode()
    info = tarfile.TarInfo("a")
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))
pydoc.render_doc(collections, renderer=pydoc.plaintext)
pydoc.HTMLDoc().docmodule(json)
w = io.StringIO()
c = csv.writer(w)
for i in range(5000):
    c.writerow([i, str(i), i * 1.5])
list(csv.reader(io.StringIO(w.getvalue())))


async def work(n):
    await asyncio.sleep(0)
    return n * 2


async def main():
    return sum(await asyncio.gather(*(work(i) for i in range(2000))))


print(asyncio.run(main()))
print(statistics.stdev(random.random() for _ in range(20000)))
print(hashlib.sha256(zlib.compress(base64.b64encode(s.encode()))).hexdigest())
print(textwrap.fill(s[:20000], 60)[:10])
print(len(re.findall(r"\"(\d+)\": \[\d+, [\d.]+", s)))
