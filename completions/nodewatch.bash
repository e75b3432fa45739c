# bash completion for nodewatch: nodewatch itself answers (it only reads
# its command-line definition; nothing connects), given the words before
# the cursor and the word at it.
_nodewatch_complete() {
	local cur=${COMP_WORDS[COMP_CWORD]} out
	# bash splits --flag=value at the "=": a lone "=" is no part of a value.
	[[ $cur == = ]] && cur=
	out=$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null)
	if [[ $out == :files ]]; then
		compopt -o filenames
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	else
		mapfile -t COMPREPLY < <(compgen -W "$out" -- "$cur")
	fi
}
complete -F _nodewatch_complete nodewatch
