package unitfile

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitExec(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		err  bool
	}{
		{line: `/usr/local/bin/nodewatch nodes --filter ".state == \"NODE_STATE_UP\"" --exec /usr/local/bin/on-nodes.sh`,
			want: []string{"/usr/local/bin/nodewatch", "nodes", "--filter", `.state == "NODE_STATE_UP"`, "--exec", "/usr/local/bin/on-nodes.sh"}},
		{line: "a\t 'b c'  d\\ e", want: []string{"a", "b c", "d e"}},
		{line: "--cert %d/cert 100%%", want: []string{"--cert", "%d/cert", "100%"}},
		{line: "--cert %n", err: true},
		{line: "--etcd $ETCD", err: true},
		{line: `"unterminated`, err: true},
	} {
		got, err := SplitExec(tc.line)
		if (err != nil) != tc.err {
			t.Errorf("SplitExec(%q): error %v, want one: %v", tc.line, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("SplitExec(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
}

func TestParse(t *testing.T) {
	u, err := Parse("# comment\n[Service]\nExecStart=/bin/a \\\n  --b\n; another\nEnvironment=A=1\nEnvironment=B=2\n\n[Install]\nWantedBy=multi-user.target\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Section{
		"Service": {{"ExecStart", "/bin/a  --b"}, {"Environment", "A=1"}, {"Environment", "B=2"}},
		"Install": {{"WantedBy", "multi-user.target"}},
	}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if got, ok := u["Service"].Last("Environment"); !ok || got != "B=2" {
		t.Errorf("Last(Environment) = %q, %v; want B=2", got, ok)
	}
	for _, text := range []string{"A=1\n", "[S]\nno equals\n", "[S]\nA=1 \\\n"} {
		if _, err := Parse(text); err == nil {
			t.Errorf("Parse(%q): no error", text)
		}
	}
}
