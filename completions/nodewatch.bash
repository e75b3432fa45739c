# bash completion for nodewatch
_nodewatch_complete() {
	local cur="${COMP_WORDS[COMP_CWORD]}"
	local opts
	if [[ "$cur" == -* ]]; then
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
	else
		opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
	fi
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _nodewatch_complete nodewatch
