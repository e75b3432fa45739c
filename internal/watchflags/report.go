package watchflags

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nodewatch/nodewatch/internal/watch"
)

// Goal describes the goal the options set (--until, --each, --once or
// --count), for a run that ended before it was met.
func (o *Options) Goal() string {
	held := ""
	if o.Stable > 0 {
		held = fmt.Sprintf(" for %v (--stable)", o.Stable)
	}
	switch {
	case o.Until != nil:
		return "--until was met" + held
	case o.Each != nil && o.AtLeast > 0:
		return fmt.Sprintf("%d objects met --each", o.AtLeast) + held
	case o.Each != nil:
		return "every object met --each" + held
	case o.Once:
		return "the initial state was printed (--once)"
	case o.Count > 0:
		return fmt.Sprintf("%d events were printed (--count)", o.Count)
	}
	return "none"
}

// asked is the goal the flags set, as they were given (--report's
// "goal"): `--each '.state == "NODE_STATE_UP"' --at-least 3`; "none".
func asked(c *cli.Context) string {
	var parts []string
	for _, f := range []string{"until", "each", "at-least", "once", "count", "stable", "fail-if"} {
		switch {
		case !c.IsSet(f):
		case f == "once":
			parts = append(parts, "--once")
		default:
			parts = append(parts, "--"+f+" "+shellQuote(fmt.Sprint(c.Value(f))))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a shell where it needs it, as a user would
// write it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Report tells how res ended: each line through logf, when the run ended
// without its goal (a timeout or an interrupt, with a goal set) or
// --fail-if ended it, and as JSON into --report FILE, however it ended.
// The error names --report.
func (o *Options) Report(res watch.Result, logf func(format string, args ...any)) error {
	if res.Missed || res.Stop == watch.FailConditionMet {
		for _, line := range res.Report.Lines(o.Options, o.What) {
			logf("report: %s", line)
		}
	}
	if o.reportFile == "" {
		return nil
	}
	b, err := json.MarshalIndent(struct {
		Stop string `json:"stop"`
		Goal string `json:"goal"`
		Met  bool   `json:"met"`
		*watch.Report
	}{res.Stop.String(), o.asked, res.Stop == watch.GoalMet, res.Report}, "", "  ")
	if err == nil {
		err = os.WriteFile(o.reportFile, append(b, '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}
