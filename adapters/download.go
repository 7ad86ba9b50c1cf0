package adapters

import (
	"fmt"
	"net/http"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// CheckSize refuses a shared file over max bytes before anything is
// fetched, saying what the limit is: "<name> is <size>, over the <max>
// <limit>".
func CheckSize(f agent.File, max int64, limit string) error {
	if f.Size <= max {
		return nil
	}
	return fmt.Errorf("%s is %s, over the %s %s", f.Name, tools.FormatSize(f.Size), tools.FormatSize(max), limit)
}

// Download fetches a file someone shared with req and saves it in the
// workspace at [UploadPath], refusing more than max bytes; it returns the
// path. accept, unless nil, may refuse the response before its body is
// read: a platform that answers with a login page rather than the file.
func Download(client *http.Client, req *http.Request, ws *tools.Workspace, name string, max int64, accept func(*http.Response) error) (string, error) {
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download: HTTP %d", resp.StatusCode)
	}
	if accept != nil {
		if err := accept(resp); err != nil {
			return "", err
		}
	}
	dest := UploadPath(ws, name)
	if _, _, err := ws.WriteFrom(dest, resp.Body, max); err != nil {
		return "", err
	}
	return dest, nil
}
