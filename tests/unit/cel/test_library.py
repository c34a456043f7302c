"""Kubernetes' CEL libraries, one table per family (results as in k8s.io/apiserver's
``pkg/cel/library`` tests and cel-go's extension tests)."""

from __future__ import annotations

from typing import Any

import pytest

from ._util import Err, compile_error, outcome, same

LISTS: list[tuple[str, str, Any]] = [
    ("isSorted", "[1, 2, 3].isSorted()", True),
    ("isSorted false", "[3, 1].isSorted()", False),
    ("isSorted strings", "['a', 'b', 'b'].isSorted()", True),
    ("isSorted empty", "[].isSorted()", True),
    ("sum ints", "[1, 2, 3].sum()", 6),
    ("sum doubles", "[1.5, 2.5].sum()", 4.0),
    ("sum durations", "[duration('1s'), duration('2s')].sum() == duration('3s')", True),
    ("sum empty", "[].sum()", 0),
    ("sum overflow", "[9223372036854775807, 1].sum()", Err("integer overflow")),
    ("min", "[3, 1, 2].min()", 1),
    ("max", "[3, 1, 2].max()", 3),
    ("max strings", "['a', 'c', 'b'].max()", "c"),
    ("min empty", "[].min()", Err("min called on empty list")),
    ("max empty", "[].max()", Err("max called on empty list")),
    ("indexOf", "[1, 2, 1].indexOf(1)", 0),
    ("lastIndexOf", "[1, 2, 1].lastIndexOf(1)", 2),
    ("indexOf missing", "[1, 2].indexOf(5)", -1),
    ("indexOf lists", "[[1], [2]].indexOf([2])", 1),
    ("includes", "[1, 2].includes(2)", True),
    ("slice", "[1, 2, 3, 4].slice(1, 3)", [2, 3]),
    ("slice out of range", "[1].slice(0, 2)", Err("list is length 1")),
    ("slice backwards", "[1, 2].slice(2, 1)", Err("start index must be less than")),
    ("flatten one level", "[[1], [2, 3]].flatten()", [1, 2, 3]),
    ("flatten depth", "[[[1]], [[2, 3]]].flatten(2)", [1, 2, 3]),
    ("flatten keeps deeper lists", "[[[1]], [[2, 3]]].flatten()", [[1], [2, 3]]),
    ("flatten negative", "dyn([[1]]).flatten(-1)", Err("level must be non-negative")),
    ("lists.range", "lists.range(3)", [0, 1, 2]),
    ("reverse", "[1, 2, 3].reverse()", [3, 2, 1]),
    ("distinct", "[1, 2, 2, 3, 1].distinct()", [1, 2, 3]),
    ("sort", "[3, 1, 2].sort()", [1, 2, 3]),
    ("sort mixed", "(dyn(['a']) + [1]).sort()", Err("same type")),
    ("sortBy", "[{'k': 2}, {'k': 1}].sortBy(e, e.k).map(e, e.k)", [1, 2]),
    ("sets.contains", "sets.contains([1, 2, 3], [3, 1])", True),
    ("sets.contains missing", "sets.contains([1, 2], [3])", False),
    ("sets.equivalent", "sets.equivalent([1, 2, 2], [2, 1])", True),
    ("sets.intersects", "sets.intersects([1, 2], [2, 5])", True),
]

STRINGS: list[tuple[str, str, Any]] = [
    ("charAt", "'hello'.charAt(4)", "o"),
    ("charAt at end", "'hello'.charAt(5)", ""),
    ("charAt negative", "'hello'.charAt(-1)", Err("index out of range: -1")),
    ("indexOf", "'hello mellow'.indexOf('ello')", 1),
    ("indexOf empty", "'hello mellow'.indexOf('')", 0),
    ("indexOf offset", "'hello mellow'.indexOf('ello', 2)", 7),
    ("indexOf beyond end", "'hello mellow'.indexOf('ello', 20)", -1),
    ("indexOf negative offset", "'hello mellow'.indexOf('ello', -1)", Err("index out of range")),
    ("indexOf counts code points", "'żółw'.indexOf('w')", 3),
    ("lastIndexOf", "'hello mellow'.lastIndexOf('ello')", 7),
    ("lastIndexOf empty", "'hello mellow'.lastIndexOf('')", 12),
    ("lastIndexOf offset", "'hello mellow'.lastIndexOf('ello', 6)", 1),
    ("lastIndexOf beyond end", "'hello mellow'.lastIndexOf('ello', 20)",
     Err("index out of range")),
    ("lowerAscii", "'TacoCÆt Xii'.lowerAscii()", "tacocÆt xii"),
    ("upperAscii", "'TacoCÆt Xii'.upperAscii()", "TACOCÆT XII"),
    ("replace", "'hello hello'.replace('he', 'we')", "wello wello"),
    ("replace n", "'hello hello'.replace('he', 'we', 1)", "wello hello"),
    ("replace none", "'hello hello'.replace('he', 'we', 0)", "hello hello"),
    ("replace empty", "'hi'.replace('', '_')", "_h_i_"),
    ("split", "'a b c'.split(' ')", ["a", "b", "c"]),
    ("split zero", "'a b c'.split(' ', 0)", []),
    ("split one", "'a b c'.split(' ', 1)", ["a b c"]),
    ("split two", "'a b c'.split(' ', 2)", ["a", "b c"]),
    ("split empty separator", "'abc'.split('')", ["a", "b", "c"]),
    ("substring", "'tacocat'.substring(4)", "cat"),
    ("substring range", "'tacocat'.substring(0, 4)", "taco"),
    ("substring backwards", "'tacocat'.substring(2, 1)",
     Err("invalid substring range. start: 2, end: 1")),
    ("substring negative", "'tacocat'.substring(-1)", Err("index out of range: -1")),
    ("trim", "'  \\ttrim\\n    '.trim()", "trim"),
    ("trim keeps zero-width space", "'\\u200btrim'.trim()", "\u200btrim"),
    ("join", "['hello', 'mellow'].join(' ')", "hello mellow"),
    ("join empty", "[].join()", ""),
    ("format", "'%s is %d years and %.2f'.format(['Tom', 3, 1.5])", "Tom is 3 years and 1.50"),
    ("format values", "'%s %s %s'.format([true, [1, 'a'], null])", 'true [1, "a"] null'),
    ("format time", "'%s %s'.format([duration('1m'), timestamp('2000-01-01T00:00:00Z')])",
     "60s 2000-01-01T00:00:00Z"),
    ("format bases", "'%b %o %x %X'.format([5, 8, 255, 255])", "101 10 ff FF"),
    ("format percent", "'100%%'.format([])", "100%"),
    ("format too few args", "'%s %s'.format(['a'])", Err("index 1 out of range")),
    ("format wrong type", "'%d'.format(['a'])", Err("integer clause")),
    ("strings.quote", "strings.quote('a\"b\\n')", '"a\\"b\\n"'),
]

REGEX: list[tuple[str, str, Any]] = [
    ("find", "'abc 123'.find('[0-9]+')", "123"),
    ("find nothing", "'abc 123'.find('xyz')", ""),
    ("findAll", "'123 abc 456'.findAll('[0-9]+')", ["123", "456"]),
    ("findAll limit", "'123 abc 456'.findAll('[0-9]+', 1)", ["123"]),
    ("findAll skips empty matches after a match", "'1 2'.findAll('[0-9]*')", ["1", "2"]),
    ("findAll keeps other empty matches", "'1 a 2'.findAll('[0-9]*')", ["1", "", "", "2"]),
    ("findAll none", "'123 abc 456'.findAll('xyz')", []),
    ("find dynamic bad regex", "'a'.find(dyn('['))", Err("Illegal regex: error parsing regexp")),
    ("matches RE2 classes", "'a1'.matches('^\\\\w\\\\d$')", True),
]

URLS: list[tuple[str, str, Any]] = [
    ("isURL absolute", "isURL('https://user:pass@example.com:80/path?query=val#fragment')", True),
    ("isURL path", "isURL('/absolute-path')", True),
    ("isURL relative", "isURL('../relative-path')", False),
    ("isURL bad port", "isURL('https://a:b:c/')", False),
    ("url error", "url('https://a:b:c/')", Err('invalid port ":c" after host')),
    ("getScheme", "url('https://example.com/').getScheme()", "https"),
    ("getScheme of a path", "url('/path').getScheme()", ""),
    ("getHost", "url('https://example.com:80/').getHost()", "example.com:80"),
    ("getHost IPv6", "url('https://[::1]:80/').getHost()", "[::1]:80"),
    ("getHostname", "url('https://example.com:80/').getHostname()", "example.com"),
    ("getHostname IPv6", "url('https://[::1]:80/').getHostname()", "::1"),
    ("getPort", "url('https://example.com:80/').getPort()", "80"),
    ("getPort none", "url('https://example.com/').getPort()", ""),
    ("getEscapedPath", "url('https://example.com/path with spaces/').getEscapedPath()",
     "/path%20with%20spaces/"),
    ("getEscapedPath empty", "url('https://example.com').getEscapedPath()", ""),
    ("getQuery", "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery()",
     {"k1": ["a"], "k2": ["b", "c"]}),
    ("getQuery unescapes", "url('https://example.com/p?key with spaces=a+b').getQuery()",
     {"key with spaces": ["a b"]}),
    ("getQuery empty", "url('https://example.com/path?').getQuery()", {}),
]

QUANTITY: list[tuple[str, str, Any]] = [
    ("isQuantity", "isQuantity('20Mi')", True),
    ("isQuantity decimal", "isQuantity('20M')", True),
    ("isQuantity bad suffix", "isQuantity('20Mo')", False),
    ("parse error", "quantity('10Mo')", Err("quantities must match the regular expression")),
    ("suffix error", "quantity('10Mm')", Err("unable to parse quantity's suffix")),
    ("equality is by value", "quantity('200M') == quantity('0.2G')", True),
    ("binary and decimal", "quantity('1Gi') == quantity('1024Mi')", True),
    ("not equal", "quantity('200M') == quantity('0.3G')", False),
    ("isLessThan", "quantity('50M').isLessThan(quantity('50Mi'))", True),
    ("isGreaterThan", "quantity('50Mi').isGreaterThan(quantity('50M'))", True),
    ("compareTo", "quantity('200M').compareTo(quantity('0.2G'))", 0),
    ("compareTo less", "quantity('50M').compareTo(quantity('50Mi'))", -1),
    ("add", "quantity('50k').add(quantity('20')) == quantity('50.02k')", True),
    ("add int", "quantity('50k').add(20) == quantity('50020')", True),
    ("sub", "quantity('50k').sub(quantity('20')) == quantity('49.98k')", True),
    ("sub int", "quantity('50k').sub(20).asInteger()", 49980),
    ("asInteger", "quantity('50k').asInteger()", 50000),
    ("asInteger of a fraction", "quantity('50m').asInteger()",
     Err("cannot convert value to integer")),
    ("asInteger beyond int64", "quantity('9999999999999999999999999999999999999G').asInteger()",
     Err("cannot convert value to integer")),
    ("isInteger", "quantity('50').isInteger()", True),
    ("isInteger fraction", "quantity('50m').isInteger()", False),
    ("asApproximateFloat", "quantity('50.703k').asApproximateFloat()", 50703.0),
    ("sign", "sign(quantity('-50k'))", -1),
    ("sign zero", "sign(quantity('0'))", 0),
    ("exponent suffix", "quantity('1e3') == quantity('1k')", True),
    ("nano rounding up", "quantity('0.0000000001') == quantity('1n')", True),
]

NETWORK: list[tuple[str, str, Any]] = [
    ("isIP v4", "isIP('192.168.0.1')", True),
    ("isIP v6", "isIP('2001:db8::68')", True),
    ("isIP leading zero", "isIP('192.168.0.01')", False),
    ("isIP mapped", "isIP('::ffff:192.168.0.1')", False),
    ("isIP zone", "isIP('fe80::1%eth0')", False),
    ("ip too long", "ip('192.168.0.1.0')",
     Err('ParseAddr("192.168.0.1.0"): IPv4 address too long')),
    ("ip missing field", "ip('2001:db8:::68')",
     Err('each colon-separated field must have at least one digit (at ":68")')),
    ("ip zone", "ip('fe80::1%eth0')", Err("with zone value is not allowed")),
    ("ip mapped", "ip('::ffff:192.168.0.1')", Err("IPv4-mapped IPv6 address")),
    ("family", "ip('192.168.0.1').family()", 4),
    ("family v6", "ip('::1').family()", 6),
    ("string of ip", "string(ip('2001:DB8::0:68'))", "2001:db8::68"),
    ("isCanonical", "ip.isCanonical('2001:db8::abcd')", True),
    ("not canonical", "ip.isCanonical('2001:DB8::ABCD')", False),
    ("not canonical zeros", "ip.isCanonical('2001:db8::0:0:0:abcd')", False),
    ("isUnspecified", "ip('::').isUnspecified()", True),
    ("isLoopback", "ip('127.0.0.1').isLoopback()", True),
    ("isLinkLocalMulticast", "ip('224.0.0.1').isLinkLocalMulticast()", True),
    ("isLinkLocalMulticast v6", "ip('ff02::1').isLinkLocalMulticast()", True),
    ("isLinkLocalUnicast", "ip('169.254.169.254').isLinkLocalUnicast()", True),
    ("isGlobalUnicast", "ip('192.168.0.1').isGlobalUnicast()", True),
    ("broadcast is not global", "ip('255.255.255.255').isGlobalUnicast()", False),
    ("ip equality", "ip('::1') == ip('0:0::1')", True),
    ("isCIDR", "isCIDR('192.168.0.0/16')", True),
    ("isCIDR too long", "isCIDR('192.168.0.0/33')", False),
    ("cidr empty bits", "cidr('192.168.0.0/')", Err('bad bits after slash: ""')),
    ("containsIP", "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", True),
    ("containsIP string", "cidr('192.168.0.0/24').containsIP('192.168.1.1')", False),
    ("containsIP other family", "cidr('::/0').containsIP('1.2.3.4')", False),
    ("containsCIDR", "cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))", True),
    ("containsCIDR wider", "cidr('192.168.1.0/24').containsCIDR('192.168.0.0/16')", False),
    ("cidr ip", "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')", True),
    ("masked", "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", True),
    ("host bits make a different cidr", "cidr('192.168.0.1/24') == cidr('192.168.0.0/24')",
     False),
    ("prefixLength", "cidr('::1/128').prefixLength()", 128),
    ("string of cidr", "string(cidr('192.168.0.0/24'))", "192.168.0.0/24"),
    ("type of ip", "type(ip('1.2.3.4')) == net.IP", True),
]

FORMATS: list[tuple[str, str, Any]] = [
    ("valid label", "format.dns1123Label().validate('my-name')", None),
    ("label errors", "format.dns1123Label().validate('My_Name').value()",
     ["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
      "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
      "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ("subdomain", "format.dns1123Subdomain().validate('apiextensions.k8s.io').hasValue()",
     False),
    ("dns1035 needs a letter first", "format.dns1035Label().validate('1abc').hasValue()", True),
    ("label prefix", "format.dns1123LabelPrefix().validate('my-label-prefix-').hasValue()",
     False),
    ("qualified name", "format.qualifiedName().validate('apiextensions.k8s.io/v1beta1')"
                       ".hasValue()", False),
    ("label value", "format.labelValue().validate('my-cool-label-Value!!').hasValue()", True),
    ("uri", "format.uri().validate('http://example.com').hasValue()", False),
    ("uuid", "format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
     False),
    ("bad uuid", "format.uuid().validate('not-a-uuid').value()",
     ["does not match the UUID format"]),
    ("byte", "format.byte().validate('aGVsbG8=').hasValue()", False),
    ("date", "format.date().validate('2020-01-32').value()", ["invalid date"]),
    ("datetime", "format.datetime().validate('2020-01-01T00:00:00Z').hasValue()", False),
    ("named", "format.named('dns1123Label').value().validate('ok').hasValue()", False),
    ("named unknown", "format.named('unknown').hasValue()", False),
]

SEMVER: list[tuple[str, str, Any]] = [
    ("isSemver", "isSemver('1.2.3-beta.1+build.1')", True),
    ("isSemver v prefix", "isSemver('v1.0.0')", False),
    ("isSemver normalized", "isSemver('v1.0', true)", True),
    ("leading zeros", "isSemver('01.01.01')", False),
    ("parse error", "semver('v1.0')", Err("No Major.Minor.Patch elements found")),
    ("normalize", "semver('v01.01', true) == semver('1.1.0')", True),
    ("pre-release is less", "semver('1.2.3-rc.1').isLessThan(semver('1.2.3'))", True),
    ("numeric pre-release order", "semver('1.0.0-2').isLessThan(semver('1.0.0-10'))", True),
    ("compareTo", "semver('1.2.3').compareTo(semver('0.1.2'))", 1),
    ("major minor patch", "[semver('1.2.3').major(), semver('1.2.3').minor(), "
                          "semver('1.2.3').patch()]", [1, 2, 3]),
]

OPTIONALS: list[tuple[str, str, Any]] = [
    ("of", "optional.of(1).hasValue()", True),
    ("none", "optional.none().hasValue()", False),
    ("value", "optional.of('a').value()", "a"),
    ("orValue", "optional.none().orValue(2)", 2),
    ("ofNonZeroValue", "optional.ofNonZeroValue([]).hasValue()", False),
    ("equality", "optional.of(1) == optional.of(1)", True),
]


def _cases() -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    for family, table in (("lists", LISTS), ("strings", STRINGS), ("regex", REGEX),
                          ("urls", URLS), ("quantity", QUANTITY), ("network", NETWORK),
                          ("formats", FORMATS), ("semver", SEMVER), ("optionals", OPTIONALS)):
        out.extend((f"{family}: {name}", expr, want) for name, expr, want in table)
    return out


CASES = _cases()


@pytest.mark.parametrize(("expr", "want"), [(e, w) for _, e, w in CASES],
                         ids=[c[0] for c in CASES])
def test_library(expr: str, want: Any) -> None:
    got = outcome(expr)
    if want is None:
        assert getattr(got, "present", None) is False, got
    else:
        assert same(got, want), f"{expr}: got {got!r}, want {want!r}"


@pytest.mark.parametrize(("expr", "want"), [
    ("quantity('1').sign() == 1", "found no matching overload for 'sign' applied to"),
    ("quantity(1)", "found no matching overload for 'quantity' applied to '(int)'"),
    ("isQuantity([1, 2, 3])", "found no matching overload for 'isQuantity'"),
    ("ip('1.2.3.4').family() == '4'", "found no matching overload for '_==_'"),
    ("format.nope().validate('x')", "undeclared reference to 'nope'"),
    ("url('/a').getHost().getPort()", "found no matching overload for 'getPort'"),
], ids=["sign is global", "quantity of int", "isQuantity of list", "family is int",
        "unknown format", "getPort needs a URL"])
def test_library_signatures_are_checked(expr: str, want: str) -> None:
    assert want in compile_error(expr)
