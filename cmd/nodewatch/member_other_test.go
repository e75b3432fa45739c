//go:build unix && !linux

package main

// memberMain does nothing: the fault suite runs on Linux only.
func memberMain() {}
