package console

import "testing"

func TestColorOn(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		color string
		tty   bool
		env   func(string) string
		want  bool
	}{
		{"auto", true, env("TERM", "xterm-256color"), true},
		{"auto", false, env("TERM", "xterm-256color"), false},
		{"auto", true, env("TERM", "dumb"), false},
		{"auto", true, env("NO_COLOR", "1"), false},
		{"auto", true, env("NO_COLOR", ""), true},
		{"always", false, env("NO_COLOR", "1", "TERM", "dumb"), true},
		{"never", true, env("TERM", "xterm"), false},
	} {
		m, err := ParseColor(c.color)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.On(c.tty, c.env); got != c.want {
			t.Errorf("--color %s, terminal %v, NO_COLOR=%q TERM=%q: colour %v, want %v", c.color, c.tty, c.env("NO_COLOR"), c.env("TERM"), got, c.want)
		}
	}
	if _, err := ParseColor("yes"); err == nil {
		t.Error("ParseColor(yes): no error")
	}
}
