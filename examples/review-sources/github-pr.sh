#!/bin/sh
# A review source for `cordon session watch` (an example adapter, not a dependency of cordon):
# the review comments of one GitHub pull request and its state, as the JSON lines the watcher
# reads. Uses the GitHub CLI (`gh`, https://cli.github.com) and `jq`.
#
#   cordon session watch "$id" --secret GH_TOKEN \
#     --source "examples/review-sources/github-pr.sh owner/repo 123" \
#     --fixer "./fix-comments.sh" --reviewer "./ai-review.sh"
#
# Prints one line per comment: inline review comments (rc-ID), conversation comments (ic-ID)
# and review summaries with a body (rv-ID), each {"id","body","author","url"}; then the state
# {"state": "open"|"merged"|"closed"}. Comments by the authors named in IGNORE_AUTHORS
# (comma-separated, e.g. the fixer's own bot account) are left out. Ids stay the same from
# one poll to the next: the watcher takes each comment once.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 OWNER/REPO PR_NUMBER" >&2
    exit 2
fi
repo=$1
pr=$2
ignore=${IGNORE_AUTHORS:-}

# Everything is fetched first: a failed call fails the poll (exit non-zero: the watcher takes
# no state from it) rather than printing half of the comments.
rc=$(gh api --paginate "repos/$repo/pulls/$pr/comments")
ic=$(gh api --paginate "repos/$repo/issues/$pr/comments")
rv=$(gh api --paginate "repos/$repo/pulls/$pr/reviews")
pull=$(gh api "repos/$repo/pulls/$pr")

# `gh api --paginate` prints one JSON array per page; jq reads them one after the other.
# Comments without a body and those of ignored authors are left out.
items() {
    printf '%s' "$2" | jq -c --arg ignore "$ignore" --arg prefix "$1" '
      .[] | select((.body // "") != "")
      | (.user.login // "") as $who
      | select(any($ignore | split(",")[]; . == $who) | not)
      | {id: ($prefix + (.id | tostring)), body, author: $who, url: .html_url}'
}
items rc- "$rc"
items ic- "$ic"
items rv- "$rv"
printf '%s' "$pull" |
    jq -c '{state: (if .merged then "merged" elif .state == "closed" then "closed" else "open" end)}'
