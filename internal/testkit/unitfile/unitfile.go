// Package unitfile is test scaffolding that reads systemd unit files as
// systemd does, as far as the tests of the examples need: the sections
// and their directives, and an ExecStart= (or Environment=) line split
// into words. It is shared by the tests of deploy/'s units and of the
// README's cron recipe, which run the same lines as systemd would.
package unitfile

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
)

// Directive is one line of a unit file, continuation lines joined.
type Directive struct{ Key, Value string }

// Section is a section's directives, in order.
type Section []Directive

// All returns the values of every key= in s, in order.
func (s Section) All(key string) []string {
	var vs []string
	for _, d := range s {
		if d.Key == key {
			vs = append(vs, d.Value)
		}
	}
	return vs
}

// Last returns the value of the last key= in s (the one that counts for a
// setting of one value), and whether there is one.
func (s Section) Last(key string) (string, bool) {
	vs := s.All(key)
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// Parse reads a unit file as systemd does: [Section] headers, KEY=VALUE
// lines, comments (# or ;) and blank lines skipped, a line ending in a
// backslash continued on the next (the backslash becomes a space). It
// returns the sections by name.
func Parse(text string) (map[string]Section, error) {
	u := map[string]Section{}
	var cur string
	var pending strings.Builder // a line continued so far
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if l, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(l + " ")
			continue
		}
		line = pending.String() + line
		pending.Reset()
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			cur = line[1 : len(line)-1]
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || cur == "" {
			return nil, fmt.Errorf("line %d: %q: not KEY=VALUE in a section", n, line)
		}
		u[cur] = append(u[cur], Directive{strings.TrimSpace(key), strings.TrimSpace(value)})
	}
	if pending.Len() > 0 {
		return nil, errors.New("the last line ends in a backslash")
	}
	return u, sc.Err()
}

// SplitExec splits an ExecStart= command line as systemd does: words
// separated by white space, double or single quotes grouping, a backslash
// escaping the next character. Of the specifiers, it knows %% and keeps %d
// (the credentials directory) for the caller; a variable ($NAME) it does
// not expand is an error, as is another specifier.
func SplitExec(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			in = true
		case ch == '%' && i+1 < len(line):
			i++
			switch line[i] {
			case '%':
				cur.WriteByte('%')
			case 'd':
				cur.WriteString("%d")
			default:
				return nil, fmt.Errorf("specifier %%%c: the test knows only %%d and %%%%", line[i])
			}
			in = true
		case ch == '$':
			return nil, errors.New("a variable ($…): the test does not expand them")
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(ch)
		case ch == '"' || ch == '\'':
			quote, in = ch, true
		case ch == ' ' || ch == '\t':
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if in {
		args = append(args, cur.String())
	}
	return args, nil
}
