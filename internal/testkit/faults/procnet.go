//go:build linux

package faults

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// ConnectedTo returns the indices of the addresses (host:port, IPv4) in
// addrs that process pid has an established TCP connection to, read from
// /proc: the member or replica a watcher is really connected to, whatever
// order its endpoints were given in.
func ConnectedTo(pid int, addrs []string) []int {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	remote := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "01" || !inodes[fs[9]] { // 01: ESTABLISHED
			continue
		}
		if a, ok := hexAddr(fs[2]); ok {
			remote[a] = true
		}
	}
	var out []int
	for i, a := range addrs {
		if remote[a] {
			out = append(out, i)
		}
	}
	return out
}

// hexAddr decodes /proc/net/tcp's 0100007F:1F90 into 127.0.0.1:8080.
func hexAddr(s string) (string, bool) {
	ip, port, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(ip)
	if !ok || err != nil || len(b) != 4 {
		return "", false
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return "", false
	}
	return net.JoinHostPort(net.IPv4(b[3], b[2], b[1], b[0]).String(), strconv.Itoa(int(p))), true
}
