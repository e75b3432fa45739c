# fish completion for nodewatch: nodewatch itself answers (it only reads
# its command-line definition; nothing connects), given the words before
# the cursor and the word at it.
function __nodewatch_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l out ($words[1] $words[2..-1] $cur --generate-bash-completion 2>/dev/null)
    if test "$out" = ":files"
        __fish_complete_path $cur
    else
        printf '%s\n' $out
    end
end
complete -c nodewatch -f -a '(__nodewatch_complete)'
