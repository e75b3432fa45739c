package render

import (
	"io/fs"
	"os"
)

// keepOwner does nothing on Windows: the new file has the owner and the
// ACL that its directory passes on to new files, not the old file's own.
func keepOwner(*os.File, fs.FileInfo) error { return nil }

// syncDir does nothing on Windows, where a directory cannot be opened
// and synced as a file: the rename is as durable as the file system
// (NTFS journals it) makes it.
func syncDir(string) error { return nil }
