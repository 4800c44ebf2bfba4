#!/usr/bin/env python3
"""Score Microsoft Presidio's predefined recognizers on the labelled set that
`cargo run -p sieve-mark --release --example eval -- --write DIR` wrote, with the same metrics
as the eval example: recall per planted kind (an item counts only if it lies wholly inside one
range that some recognizer returned, whatever entity it named) and over-marking (the share of
bytes that are no planted item but were returned).

Presidio's NLP recognizer (names, places) needs a spaCy model, and the official models are
downloaded from outside the package registries, which this machine cannot reach; so only the
recognizers that need no model run: the predefined pattern recognizers (and the phone
recognizer, which uses the `phonenumbers` library), every one the default English registry
loads. All results count, whatever their score (Presidio's own default threshold is 0).

usage: bench/presidio_eval.py DIR
"""
import json
import os
import sys
import time
from collections import defaultdict


def main():
    d = sys.argv[1]
    # The e-mail recognizer's domain check would fetch the public suffix list; use the copy
    # the package ships.
    import tldextract
    import tldextract.tldextract as te

    te.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())
    from presidio_analyzer import RecognizerRegistry

    reg = RecognizerRegistry()
    reg.load_predefined_recognizers(languages=["en"])
    recognizers = []
    skipped = []
    for r in reg.recognizers:
        name = type(r).__name__
        try:
            r.analyze("probe 4111 1111 1111 1111 a@b.io", r.supported_entities, None)
            recognizers.append(r)
        except Exception as e:  # a recognizer that needs an NLP model
            skipped.append(f"{name} ({type(e).__name__})")
    print(f"presidio-analyzer recognizers run: {len(recognizers)}: "
          + ", ".join(sorted(type(r).__name__ for r in recognizers)))
    if skipped:
        print("not run (they need a language model): " + ", ".join(skipped))

    labels = json.load(open(os.path.join(d, "labels.json")))
    by_file = defaultdict(list)
    for it in labels:
        by_file[it["file"]].append(it)
    planted = defaultdict(int)
    found = defaultdict(int)
    unplanted = 0
    unplanted_marked = 0
    t0 = time.time()
    total_bytes = 0
    print(f"\n{'file':<14} {'bytes':>9} {'over-marked':>12} {'seconds':>8}")
    for f, items in sorted(by_file.items()):
        text = open(os.path.join(d, f), encoding="ascii").read()
        total_bytes += len(text)
        t = time.time()
        spans = []
        for r in recognizers:
            for res in r.analyze(text, r.supported_entities, None):
                if res.end > res.start:
                    spans.append((res.start, res.end))
        spans.sort()
        merged = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        starts = [m[0] for m in merged]
        import bisect

        for it in items:
            planted[it["kind"]] += 1
            i = bisect.bisect_right(starts, it["start"]) - 1
            if i >= 0 and merged[i][0] <= it["start"] and it["end"] <= merged[i][1]:
                found[it["kind"]] += 1
        # Over-marking: returned bytes outside planted items.
        planted_union = []
        for a, b in sorted((it["start"], it["end"]) for it in items):
            if planted_union and a <= planted_union[-1][1]:
                planted_union[-1][1] = max(planted_union[-1][1], b)
            else:
                planted_union.append([a, b])
        pb = sum(b - a for a, b in planted_union)
        marked = sum(b - a for a, b in merged)
        overlap = 0
        j = 0
        for a, b in merged:
            while j < len(planted_union) and planted_union[j][1] <= a:
                j += 1
            k = j
            while k < len(planted_union) and planted_union[k][0] < b:
                overlap += min(b, planted_union[k][1]) - max(a, planted_union[k][0])
                k += 1
        un = len(text) - pb
        um = marked - overlap
        unplanted += un
        unplanted_marked += um
        print(f"{f:<14} {len(text):>9} {100.0 * um / max(un, 1):>11.2f}% {time.time() - t:>8.1f}")
    secs = time.time() - t0
    order = ["card", "iban", "ssn", "email", "phone", "ipv4", "ipv6", "private-key",
             "certificate", "cloud-key", "jwt", "secret", "password", "dob", "name", "address"]
    print(f"\n{'kind':<12} {'planted':>8} {'found':>8} {'recall':>9}")
    for k in order:
        if planted[k]:
            print(f"{k:<12} {planted[k]:>8} {found[k]:>8} {100.0 * found[k] / planted[k]:>8.2f}%")
    print(f"\nover-marking: {100.0 * unplanted_marked / max(unplanted, 1):.2f} % of unplanted bytes")
    print(f"speed: {total_bytes / secs / 1e6:.2f} MB/s (one Python process)")


if __name__ == "__main__":
    main()
