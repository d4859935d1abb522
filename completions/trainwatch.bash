# bash completion for trainwatch.
# Subcommands, options and format names are read from trainwatch itself
# (`trainwatch --help`, `trainwatch CMD --help`, `trainwatch formats`), so
# completion never lags behind the program. Installed by `make install` to
# share/bash-completion/completions/trainwatch; to try it from a checkout:
#   source completions/trainwatch.bash

_trainwatch_commands()
{
    "$1" --help 2>/dev/null | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}'
}

_trainwatch_options()
{
    "$1" "$2" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9.-]*' | sort -u
}

_trainwatch()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion -n = || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    local tw=${words[0]} cmd="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --) # run: what follows is the command and its own arguments
                if [ "$cmd" = run ]; then
                    if ((i + 1 == cword)); then
                        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
                    else
                        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
                    fi
                    return
                fi ;;
            -*) ;;
            *) [ -z "$cmd" ] && cmd=${words[i]} ;;
        esac
    done
    if [ -z "$cmd" ]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_trainwatch_commands "$tw") --help --version" -- "$cur")
        return
    fi
    case $prev in
        --format)
            mapfile -t COMPREPLY < <(compgen -W "$("$tw" formats 2>/dev/null | awk '{print $1}')" -- "$cur")
            return ;;
        --fail-on)
            mapfile -t COMPREPLY < <(compgen -W "error warning info" -- "$cur")
            return ;;
        --webhook-format)
            mapfile -t COMPREPLY < <(compgen -W "alertmanager dingtalk slack feishu wecom" -- "$cur")
            return ;;
        --color)
            mapfile -t COMPREPLY < <(compgen -W "auto always never" -- "$cur")
            return ;;
    esac
    case $cmd in
        help)
            mapfile -t COMPREPLY < <(compgen -W "$(_trainwatch_commands "$tw")" -- "$cur")
            return ;;
        rules)
            if ((cword == 2)); then
                mapfile -t COMPREPLY < <(compgen -W "check export defaults" -- "$cur")
                return
            fi ;;
    esac
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_trainwatch_options "$tw" "$cmd")" -- "$cur")
        return
    fi
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}

complete -F _trainwatch trainwatch
