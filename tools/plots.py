"""Figure layouts shared by the tools' plots: panels in a grid that reads at 1,600 px wide, and no more
than SERIES curves in a panel."""
COLUMNS = 3  # panels per row: a page 1,600 px wide shows each at about 500 px
SERIES = 8  # curves per panel at most: more cannot be told apart by colour and style


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def grid(count, width=5.2, height=4.0):
    """(figure, axes) of ``count`` panels in rows of at most COLUMNS, the unused places hidden."""
    plt = pyplot()
    columns = min(COLUMNS, count)
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def panels_of(names):
    """``names`` in panels of at most SERIES, the first of them (the reference: uncompressed, or the
    baseline) repeated in every panel."""
    if len(names) <= SERIES:
        return [list(names)]
    per = SERIES - 1
    return [names[:1] + names[i:i + per] for i in range(1, len(names), per)]
