# fish completion for nodewatch: nodewatch itself answers (it only reads
# its command-line definition; nothing connects), given the words before
# the cursor and the word at it.
function __nodewatch_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l out ($words[1] __complete $words[2..-1] $cur 2>/dev/null)
    if test "$out" = ":files"
        if string match -qr -- '^-.*=' $cur
            set -l flag (string split -m1 = -- $cur)
            __fish_complete_path $flag[2] | string replace -r -- '^' "$flag[1]="
        else
            __fish_complete_path $cur
        end
    else
        printf '%s\n' $out
    end
end
complete -c nodewatch -f -a '(__nodewatch_complete)'
