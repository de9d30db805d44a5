package sandbox

import (
	"regexp"
	"strconv"
)

// defaultPath is the PATH of a sandboxed command: the system directories
// the sandbox shows, and nothing of the server's own PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// gitConfig are the git settings every sandboxed command gets, as
// GIT_CONFIG_COUNT/KEY/VALUE: they rank above the repository's own config
// (only git -c ranks higher), so a .git/config cannot make the git a
// command runs start a program through these keys.
var gitConfig = [][2]string{
	{"core.fsmonitor", "false"},       // a program git runs on every status
	{"core.hooksPath", "/dev/null"},   // no hooks
	{"core.pager", "cat"},             // GIT_PAGER below wins anyway
	{"core.editor", "false"},          // commit, rebase -i, tag -a
	{"sequence.editor", "false"},      // rebase -i
	{"core.sshCommand", "ssh"},        // ssh, not a program of the repository's choosing
	{"core.askPass", ""},              // no password helper
	{"credential.helper", ""},         // an empty value drops every helper configured before
	{"core.alternateRefsCommand", ""}, // run for alternates on fetch and push
	{"protocol.ext.allow", "never"},   // ext:: URLs run commands
	{"gpg.program", "gpg"},            // signing and verifying
	{"gpg.ssh.program", "ssh-keygen"},
	{"gpg.x509.program", "gpgsm"},
	{"web.browser", ""},
	{"safe.bareRepository", "explicit"}, // an embedded bare repository brings its own config
}

// gitEnv are git's environment variables for a sandboxed command: no system
// or global config (HOME is the working folder, so ~/.gitconfig would be
// the repository's to write), a plain pager and editor, no prompts, and
// gitConfig.
func gitEnv() []string {
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_PAGER=cat",
		"GIT_EDITOR=false",
		"GIT_SEQUENCE_EDITOR=false",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"GIT_CONFIG_COUNT=" + strconv.Itoa(len(gitConfig)),
	}
	for i, kv := range gitConfig {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return env
}

// saneLang matches locale names worth passing on (C.UTF-8, en_US.UTF-8).
var saneLang = regexp.MustCompile(`^[A-Za-z_]+(\.[A-Za-z0-9-]+)?(@[A-Za-z]+)?$`)

// Environ is the whole environment of a command run in the sandbox in dir:
// PATH (the system directories), HOME (the working folder), LANG (the
// server's, when it names a locale, else C.UTF-8), TERM=dumb and git's
// (gitEnv). Nothing else of the server's environment reaches the command:
// API keys, database URLs and JWT secrets stay out of it.
func Environ(dir, lang string) []string {
	if !saneLang.MatchString(lang) {
		lang = "C.UTF-8"
	}
	env := []string{"PATH=" + defaultPath, "HOME=" + dir, "LANG=" + lang, "TERM=dumb"}
	return append(env, gitEnv()...)
}
