package state

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// holder names the process that holds the lock on path, as " (held by
// pid N: CMDLINE)", or "" when /proc does not say.
func holder(path string) string {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "FLOCK" {
			continue
		}
		dev := strings.Split(fs[5], ":")
		if len(dev) != 3 || dev[2] != strconv.FormatUint(st.Ino, 10) {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + fs[4] + "/cmdline")
		cmd = bytes.TrimRight(cmd, "\x00")
		if len(cmd) == 0 {
			return " (held by pid " + fs[4] + ")"
		}
		return fmt.Sprintf(" (held by pid %s: %s)", fs[4], bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
	}
	return ""
}
