package curator

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/nodewatch/nodewatch/internal/curator/apipb"
	"github.com/nodewatch/nodewatch/internal/curator/commonpb"
	"github.com/nodewatch/nodewatch/internal/curator/versionpb"
)

// A node's JSON is written here by hand, field by field, rather than by
// protojson, whose reflection was most of the CPU of listing 100,000
// nodes (nodes --once). The bytes are protojson's exactly, compacted:
// jsondoc.CompactValid(protojson.MarshalOptions{UseProtoNames: true}.
// Marshal(n)). TestNodeJSONModel checks that against protojson on random
// nodes made from the message descriptors, every field set or not, so a
// field added to the .proto (and regenerated) without a line here fails
// it. Unknown fields are left out, as protojson leaves them out, so a
// node from a newer Curator needs no other path.
//
// protojson's rules, as it applies them to these messages (proto3, no
// oneofs, no maps, no optional scalars):
//   - members in field-number order (declaration order, which is the
//     same here), named by the proto name;
//   - a scalar only if it is not its zero value, a message only if it is
//     set (an empty one is {}), a repeated field only if it has elements;
//   - enums by name, or as a JSON number when the value has no name;
//   - int64 and uint64 as quoted decimal strings, int32 as a number;
//   - bytes as standard base64 with padding;
//   - google.protobuf.Timestamp as RFC 3339 in UTC with 0, 3, 6 or 9
//     fractional digits and "Z"; protojson fails on seconds outside
//     0001-01-01..9999-12-31 and nanos outside 0..999,999,999;
//   - strings with ", \ and control characters escaped (\b \f \n \r \t,
//     else \u00xx), everything else as it is (DEL, <, >, &, U+2028);
//     protojson fails on invalid UTF-8.
//
// Where protojson fails, appendNode reports it and EncodeRecord asks
// protojson, so that the error is protojson's own.
//
// Every append function takes the buffer and returns it, and takes ok and
// returns it false once a value protojson refuses was met (what the buffer
// holds then is of no use): no writer struct, whose buffer the functions
// would store through a pointer, at the cost of GC write barriers.

// Timestamp's range, as protojson checks it.
const (
	minTimestampSeconds = -62135596800 // 0001-01-01T00:00:00Z
	maxTimestampSeconds = 253402300799 // 9999-12-31T23:59:59Z
)

// appendNode appends n's JSON to b, as protojson (proto names) writes it,
// compacted; ok is false if protojson would fail on n.
func appendNode(b []byte, n *apipb.Node) (_ []byte, ok bool) {
	ok = true
	b = append(b, '{')
	if n != nil {
		b, ok = appendStringField(b, `"id":`, n.Id, ok)
		if n.Roles != nil {
			b = appendName(b, `"roles":`)
			b, ok = appendRoles(b, n.Roles, ok)
		}
		if n.Status != nil {
			b = appendName(b, `"status":`)
			b, ok = appendStatus(b, n.Status, ok)
		}
		if n.Clusternet != nil {
			b = appendName(b, `"clusternet":`)
			b, ok = appendClusternet(b, n.Clusternet, ok)
		}
		b = appendEnumField(b, `"state":`, int32(n.State), commonpb.NodeState_name)
		if n.Labels != nil {
			b = appendName(b, `"labels":`)
			b, ok = appendLabels(b, n.Labels, ok)
		}
	}
	return append(b, '}'), ok
}

// appendName starts a member: a comma unless it is the object's first,
// then quoted, its name in quotes (a proto name, which needs no escaping)
// and a colon.
func appendName(b []byte, quoted string) []byte {
	if b[len(b)-1] != '{' { // no value ends with '{'
		b = append(b, ',')
	}
	return append(b, quoted...)
}

// appendString appends s as protojson quotes it; ok turns false if s is
// not valid UTF-8.
func appendString(b []byte, s string, ok bool) ([]byte, bool) {
	return appendQuoted(b, s), ok && utf8.ValidString(s)
}

// appendQuoted appends s in quotes, with ", \ and control characters
// escaped as protojson escapes them, every other byte as it is.
func appendQuoted[S ~string | ~[]byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendStringField appends the member quoted: s, if s is set.
func appendStringField(b []byte, quoted, s string, ok bool) ([]byte, bool) {
	if s == "" {
		return b, ok
	}
	return appendString(appendName(b, quoted), s, ok)
}

// appendBytesField appends the member quoted: p in base64, if p is set.
func appendBytesField(b []byte, quoted string, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	b = append(appendName(b, quoted), '"')
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}

// appendInt64Field appends the member quoted: v as a quoted string, if v
// is set.
func appendInt64Field(b []byte, quoted string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(appendName(b, quoted), '"')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '"')
}

// appendUint64Field appends the member quoted: v as a quoted string, if v
// is set.
func appendUint64Field(b []byte, quoted string, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = append(appendName(b, quoted), '"')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '"')
}

// appendInt32Field appends the member quoted: v as a number, if v is set.
func appendInt32Field(b []byte, quoted string, v int32) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(appendName(b, quoted), int64(v), 10)
}

// appendEnumField appends the member quoted: the name of v (from names,
// the generated <Enum>_name map), or v as a number if it has none, if v
// is set.
func appendEnumField(b []byte, quoted string, v int32, names map[int32]string) []byte {
	if v == 0 {
		return b
	}
	b = appendName(b, quoted)
	if s, ok := names[v]; ok {
		b = append(b, '"')
		b = append(b, s...) // enum names need no escaping
		return append(b, '"')
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// The elements of repeated fields are read with the getters: protojson
// writes a nil element as an empty object.

func appendRoles(b []byte, r *commonpb.NodeRoles, ok bool) ([]byte, bool) {
	b = append(b, '{')
	if r.KubernetesWorker != nil {
		b = appendName(b, `"kubernetes_worker":{}`) // no fields
	}
	if c := r.ConsensusMember; c != nil {
		b = append(appendName(b, `"consensus_member":`), '{')
		b = appendBytesField(b, `"ca_certificate":`, c.CaCertificate)
		b = appendBytesField(b, `"peer_certificate":`, c.PeerCertificate)
		b = appendBytesField(b, `"initial_crl":`, c.InitialCrl)
		if len(c.Peers) > 0 {
			b = appendName(b, `"peers":[`)
			for i, p := range c.Peers {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '{')
				b, ok = appendStringField(b, `"name":`, p.GetName(), ok)
				b, ok = appendStringField(b, `"url":`, p.GetUrl(), ok)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	if r.KubernetesController != nil {
		b = appendName(b, `"kubernetes_controller":{}`) // no fields
	}
	return append(b, '}'), ok
}

func appendStatus(b []byte, s *commonpb.NodeStatus, ok bool) ([]byte, bool) {
	b = append(b, '{')
	b, ok = appendStringField(b, `"external_address":`, s.ExternalAddress, ok)
	if s.Timestamp != nil {
		b = appendName(b, `"timestamp":`)
		b, ok = appendTimestamp(b, s.Timestamp.GetSeconds(), s.Timestamp.GetNanos(), ok)
	}
	if s.RunningCurator != nil {
		b = append(appendName(b, `"running_curator":`), '{')
		b = appendInt32Field(b, `"port":`, s.RunningCurator.Port)
		b = append(b, '}')
	}
	if v := s.Version; v != nil {
		b = append(appendName(b, `"version":`), '{')
		if r := v.Release; r != nil {
			b = append(appendName(b, `"release":`), '{')
			b = appendInt64Field(b, `"major":`, r.Major)
			b = appendInt64Field(b, `"minor":`, r.Minor)
			b = appendInt64Field(b, `"patch":`, r.Patch)
			b = append(b, '}')
		}
		if g := v.GitInformation; g != nil {
			b = append(appendName(b, `"git_information":`), '{')
			b, ok = appendStringField(b, `"commit_hash":`, g.CommitHash, ok)
			b = appendUint64Field(b, `"commits_since_release":`, g.CommitsSinceRelease)
			b = appendEnumField(b, `"build_tree_state":`, int32(g.BuildTreeState), versionpb.Version_GitInformation_BuildTreeState_name)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	b = appendBytesField(b, `"boot_id":`, s.BootId)
	return append(b, '}'), ok
}

func appendClusternet(b []byte, c *commonpb.NodeClusterNetworking, ok bool) ([]byte, bool) {
	b = append(b, '{')
	b, ok = appendStringField(b, `"wireguard_pubkey":`, c.WireguardPubkey, ok)
	if len(c.Prefixes) > 0 {
		b = appendName(b, `"prefixes":[`)
		for i, p := range c.Prefixes {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b, ok = appendStringField(b, `"cidr":`, p.GetCidr(), ok)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), ok
}

func appendLabels(b []byte, l *commonpb.NodeLabels, ok bool) ([]byte, bool) {
	b = append(b, '{')
	if len(l.Pairs) > 0 {
		b = appendName(b, `"pairs":[`)
		for i, p := range l.Pairs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b, ok = appendStringField(b, `"key":`, p.GetKey(), ok)
			b, ok = appendStringField(b, `"value":`, p.GetValue(), ok)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), ok
}

// appendTimestamp appends the google.protobuf.Timestamp of secs and nanos
// as protojson writes it: "2006-01-02T15:04:05Z", with 3, 6 or 9
// fractional digits if the nanos need them.
func appendTimestamp(b []byte, secs int64, nanos int32, ok bool) ([]byte, bool) {
	if secs < minTimestampSeconds || secs > maxTimestampSeconds || nanos < 0 || nanos >= 1e9 {
		return b, false
	}
	// The civil date of the day (Howard Hinnant's days_from_civil,
	// inverted), in the proleptic Gregorian calendar time uses; the range
	// keeps the year within 1..9999.
	days := secs / 86400
	sod := int(secs % 86400)
	if sod < 0 {
		days--
		sod += 86400
	}
	z := days + 719468 // days since 0000-03-01
	era := z / 146097  // z ≥ 0 for year ≥ 1
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
		y++
	}
	b = append(b, '"')
	b = appendDigits(b, int(y), 4)
	b = append(b, '-')
	b = appendDigits(b, int(m), 2)
	b = append(b, '-')
	b = appendDigits(b, int(d), 2)
	b = append(b, 'T')
	b = appendDigits(b, sod/3600, 2)
	b = append(b, ':')
	b = appendDigits(b, sod/60%60, 2)
	b = append(b, ':')
	b = appendDigits(b, sod%60, 2)
	switch ns := int(nanos); {
	case ns == 0:
	case ns%1e6 == 0:
		b = appendDigits(append(b, '.'), ns/1e6, 3)
	case ns%1e3 == 0:
		b = appendDigits(append(b, '.'), ns/1e3, 6)
	default:
		b = appendDigits(append(b, '.'), ns, 9)
	}
	return append(b, 'Z', '"'), ok
}

// appendDigits appends v ≥ 0 in n decimal digits, with leading zeros; v
// has at most n digits.
func appendDigits(b []byte, v, n int) []byte {
	for range n {
		b = append(b, '0')
	}
	for i := len(b) - 1; v > 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}
